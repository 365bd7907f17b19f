// The MCP tool allow-list: which device tools the agent may have the robot run. DESIGN §3 deliberate change:
// a validated JSON file under DATA_DIR, hot-reloaded, instead of edited code and a restart. A bad edit
// (through the route or by hand) is refused and the last good list stays in force.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-file.js';
import { HttpError } from '../util/http-error.js';
import type { Logger } from '../util/log.js';

export const DEFAULT_ALLOWED_TOOLS = [
  'self.get_device_status',
  'self.audio_speaker.set_volume',
  'self.robot.set_head_angles',
  'self.robot.get_head_angles',
  'self.robot.set_led_color',
  'self.robot.set_led_multi',
  'self.robot.get_privacy_state',
];

const TOOL_NAME = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/;
const MAX_TOOLS = 200;

export function validateAllowList(value: unknown): string[] {
  const tools = (value as { tools?: unknown })?.tools;
  if (!Array.isArray(tools)) throw new Error('the allow-list must be {"tools": [..]}');
  if (tools.length > MAX_TOOLS) throw new Error(`at most ${MAX_TOOLS} tools`);
  for (const tool of tools) {
    if (typeof tool !== 'string' || !TOOL_NAME.test(tool))
      throw new Error(`"${String(tool)}" is not a dotted MCP tool name`);
  }
  return [...new Set(tools as string[])].sort();
}

export class AllowList {
  private tools: string[];
  private loadedMtimeMs = 0;
  readonly path: string;

  constructor(
    dataDir: string,
    private readonly logger: Logger,
  ) {
    this.path = join(dataDir, 'state', 'mcp-allowlist.json');
    this.tools = [...DEFAULT_ALLOWED_TOOLS].sort();
    this.refresh();
  }

  list(): string[] {
    this.refresh();
    return [...this.tools];
  }

  allows(tool: string): boolean {
    return this.list().includes(tool);
  }

  async apply(action: 'add' | 'remove', tool: string): Promise<string[]> {
    if (!TOOL_NAME.test(tool))
      throw new HttpError(
        400,
        'invalid_tool',
        `"${tool}" is not a dotted MCP tool name like self.robot.set_head_angles`,
      );
    const current = this.list();
    if (action === 'remove' && !current.includes(tool))
      throw new HttpError(404, 'not_in_allow_list', `${tool} is not in the allow-list`);
    const next = action === 'add' ? [...current, tool] : current.filter((t) => t !== tool);
    const tools = validateAllowList({ tools: next });
    await writeFileAtomic(this.path, `${JSON.stringify({ tools }, null, 2)}\n`);
    this.tools = tools;
    this.loadedMtimeMs = statSync(this.path).mtimeMs;
    return [...tools];
  }

  /** Picks up hand edits; an invalid file is logged and ignored (the last good list stays). */
  private refresh(): void {
    if (!existsSync(this.path)) return;
    const mtime = statSync(this.path).mtimeMs;
    if (mtime === this.loadedMtimeMs) return;
    this.loadedMtimeMs = mtime;
    try {
      this.tools = validateAllowList(JSON.parse(readFileSync(this.path, 'utf8')));
    } catch (error) {
      this.logger.error(
        { path: this.path, err: (error as Error).message },
        'allow-list file is invalid; keeping the last good list',
      );
    }
  }
}
