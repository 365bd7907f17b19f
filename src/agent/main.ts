// Runs the embedded ACP agent directly (`node --import tsx src/agent/main.ts`, or dist/src/agent/main.js):
// the same as `deskbot agent`. Exits when the client closes stdin.
import { main } from './agent.js';

process.exit(await main());
