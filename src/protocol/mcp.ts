// MCP over the device WebSocket: JSON-RPC 2.0 carried in `{type:"mcp", payload}` frames.
// Firmware facts (DESIGN §4): ids must be numbers (string ids are dropped silently by the device),
// tools/list pages by `nextCursor`, errors carry only `message`, user-only tools need `withUserTools`.
import { z } from 'zod';

export interface McpTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export const mcpToolSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().default(''),
  inputSchema: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {} }),
});

const toolsListResult = z.looseObject({
  tools: z.array(mcpToolSchema),
  nextCursor: z.string().optional(),
});

const rpcId = z.number().int();
const rpcResponse = z.union([
  z.looseObject({ jsonrpc: z.literal('2.0').optional(), id: rpcId, result: z.unknown() }),
  z.looseObject({
    jsonrpc: z.literal('2.0').optional(),
    id: rpcId.nullable(),
    error: z.looseObject({ code: z.number().optional(), message: z.string().default('device error') }),
  }),
]);

export class McpError extends Error {
  constructor(
    readonly code: 'timeout' | 'device_error' | 'closed' | 'aborted' | 'bad_result',
    message: string,
    readonly rpcCode?: number,
  ) {
    super(message);
    this.name = 'McpError';
  }
}

export interface McpClientOptions {
  /** Sends one JSON-RPC message to the device. */
  send: (payload: Record<string, unknown>) => void;
  timeoutMs?: number;
  /** Called for device-initiated notifications (no id): accepted, never answered. */
  onNotification?: (method: string, params: unknown) => void;
  /** Safety cap on tools/list pages, so a device that loops on its cursor cannot hold us forever. */
  maxPages?: number;
}

/** Bounds on what one tools/list walk keeps (a device once declared 15,120 tools: +12 MB each). */
export interface ToolListCaps {
  maxTools: number;
  /** JSON bytes of the kept tools together. */
  maxBytes: number;
}

export interface ToolList {
  tools: McpTool[];
  /** Which cap stopped the walk early (the tools that fit are kept), or null when the list ended. */
  cut: 'tools' | 'bytes' | null;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
  method: string;
}

export const MCP_DEFAULT_TIMEOUT_MS = 30_000;
const utf8 = new TextEncoder();

export class McpClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  private readonly timeoutMs: number;

  constructor(private readonly options: McpClientOptions) {
    this.timeoutMs = options.timeoutMs ?? MCP_DEFAULT_TIMEOUT_MS;
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  request(
    method: string,
    params: Record<string, unknown> = {},
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<unknown> {
    if (this.closed) return Promise.reject(new McpError('closed', 'device connection is closed'));
    if (opts.signal?.aborted) return Promise.reject(new McpError('aborted', `${method} aborted`));
    const id = this.nextId++;
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        clearTimeout(timer);
        this.pending.delete(id);
        opts.signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        cleanup();
        reject(new McpError('aborted', `${method} aborted`));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new McpError('timeout', `device did not answer ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, {
        method,
        timer,
        resolve: (v) => {
          cleanup();
          resolve(v);
        },
        reject: (e) => {
          cleanup();
          reject(e);
        },
      });
      try {
        this.options.send({ jsonrpc: '2.0', id, method, params });
      } catch (error) {
        this.pending.get(id)?.reject(new McpError('closed', `could not send ${method}: ${String(error)}`));
      }
    });
  }

  /** Feeds one payload from the device. Returns false when it was not a message we could use. */
  handleMessage(payload: unknown): boolean {
    if (typeof payload !== 'object' || payload === null) return false;
    const message = payload as Record<string, unknown>;
    if (typeof message.method === 'string') {
      // Device-initiated: notifications are accepted without reply; we expose no methods to the device.
      if (message.id === undefined) this.options.onNotification?.(message.method, message.params);
      return message.id === undefined;
    }
    const parsed = rpcResponse.safeParse(message);
    if (!parsed.success) return false;
    const response = parsed.data;
    if (response.id === null) return false;
    const pending = this.pending.get(response.id);
    if (!pending) return false;
    if ('error' in response && response.error) {
      const error = response.error as { message: string; code?: number };
      pending.reject(new McpError('device_error', error.message, error.code));
    } else {
      pending.resolve((response as { result: unknown }).result);
    }
    return true;
  }

  initialize(capabilities: Record<string, unknown>, clientVersion: string): Promise<unknown> {
    return this.request('initialize', {
      protocolVersion: '2024-11-05',
      capabilities,
      clientInfo: { name: 'deskbot', version: clientVersion },
    });
  }

  /** Reads every page of tools/list (no caps: for callers that trust the device). */
  async listTools(withUserTools = false): Promise<McpTool[]> {
    const unbounded = { maxTools: Number.POSITIVE_INFINITY, maxBytes: Number.POSITIVE_INFINITY };
    return (await this.listToolsCapped(withUserTools, unbounded)).tools;
  }

  /**
   * Reads tools/list pages until the list ends or a cap is reached; then it asks for no further page and
   * keeps the tools that fit, in the device's order.
   */
  async listToolsCapped(withUserTools: boolean, caps: ToolListCaps): Promise<ToolList> {
    const tools: McpTool[] = [];
    let bytes = 0;
    let cursor = '';
    const maxPages = this.options.maxPages ?? 64;
    for (let page = 0; page < maxPages; page++) {
      const raw = await this.request('tools/list', { cursor, withUserTools });
      const parsed = toolsListResult.safeParse(raw);
      if (!parsed.success) throw new McpError('bad_result', 'tools/list result has no valid "tools" array');
      for (const tool of parsed.data.tools) {
        if (tools.length >= caps.maxTools) return { tools, cut: 'tools' };
        const size = utf8.encode(JSON.stringify(tool)).length;
        if (bytes + size > caps.maxBytes) return { tools, cut: 'bytes' };
        bytes += size;
        tools.push(tool);
      }
      if (!parsed.data.nextCursor) return { tools, cut: null };
      cursor = parsed.data.nextCursor;
    }
    throw new McpError('bad_result', `tools/list did not end within ${maxPages} pages`);
  }

  callTool(
    name: string,
    args: Record<string, unknown> = {},
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<unknown> {
    return this.request('tools/call', { name, arguments: args }, opts);
  }

  /** Rejects everything in flight; later requests fail at once. */
  close(reason = 'device connection is closed'): void {
    this.closed = true;
    for (const pending of [...this.pending.values()]) pending.reject(new McpError('closed', reason));
  }
}

/** Text a tools/call result carries, per MCP's `content: [{type:'text', text}]` convention. */
export function toolResultText(result: unknown): string {
  if (typeof result !== 'object' || result === null) return String(result ?? '');
  const content = (result as { content?: unknown }).content;
  if (!Array.isArray(content)) return JSON.stringify(result);
  return content
    .map((part) => (part && typeof part === 'object' && 'text' in part ? String(part.text) : ''))
    .join('');
}
