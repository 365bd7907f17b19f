export * from './binary.js';
export * from './frames.js';
export * from './mcp.js';
export * from './ota.js';
