// The device side of MCP, as the firmware implements it (DESIGN §4): numeric ids only (others are
// dropped silently), tools/list paged by payload size with `nextCursor` = the next tool's name,
// user-only tools listed only with `withUserTools`, errors carrying only `message`.

export interface DeviceTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  userOnly?: boolean;
  /** Returns the text result; throwing becomes a JSON-RPC error with only `message`. */
  call(args: Record<string, unknown>): Promise<string> | string;
}

export interface DeviceMcpOptions {
  /** Payload budget of one tools/list page; the firmware uses about 8000 bytes. */
  pageBytes?: number;
  onInitialize?: (params: Record<string, unknown>) => void;
  serverInfo?: { name: string; version: string };
}

type Reply = Record<string, unknown> | null;

export class DeviceMcpServer {
  private readonly tools = new Map<string, DeviceTool>();

  constructor(private readonly options: DeviceMcpOptions = {}) {}

  add(tool: DeviceTool): void {
    this.tools.set(tool.name, tool);
  }

  list(withUserTools: boolean): DeviceTool[] {
    return [...this.tools.values()].filter((tool) => withUserTools || !tool.userOnly);
  }

  /** Handles one JSON-RPC message; returns the reply payload, or null when the firmware would stay silent. */
  async handle(message: Record<string, unknown>): Promise<Reply> {
    const { id, method } = message;
    if (typeof method !== 'string') return null;
    if (method.startsWith('notifications/')) return null;
    if (typeof id !== 'number') return null;
    const params = (
      typeof message.params === 'object' && message.params !== null ? message.params : {}
    ) as Record<string, unknown>;
    try {
      return { jsonrpc: '2.0', id, result: await this.dispatch(method, params) };
    } catch (error) {
      return { jsonrpc: '2.0', id, error: { message: (error as Error).message } };
    }
  }

  private async dispatch(method: string, params: Record<string, unknown>): Promise<unknown> {
    switch (method) {
      case 'initialize':
        this.options.onInitialize?.(params);
        return {
          protocolVersion: '2024-11-05',
          capabilities: { tools: {} },
          serverInfo: this.options.serverInfo ?? { name: 'deskbot-virtual', version: '0.0.0' },
        };
      case 'tools/list':
        return this.page(
          typeof params.cursor === 'string' ? params.cursor : '',
          params.withUserTools === true,
        );
      case 'tools/call':
        return this.call(params);
      default:
        throw new Error(`Method not implemented: ${method}`);
    }
  }

  private page(cursor: string, withUserTools: boolean): { tools: unknown[]; nextCursor?: string } {
    const visible = this.list(withUserTools);
    const budget = this.options.pageBytes ?? 8000;
    let start = 0;
    if (cursor) {
      start = visible.findIndex((tool) => tool.name === cursor);
      if (start < 0) throw new Error(`Unknown cursor: ${cursor}`);
    }
    const tools: unknown[] = [];
    let size = 0;
    for (let i = start; i < visible.length; i++) {
      const tool = visible[i]!;
      const entry = { name: tool.name, description: tool.description, inputSchema: tool.inputSchema };
      // The firmware counts UTF-8 bytes (std::string::length), and refuses a tool that alone exceeds the page.
      const entrySize = Buffer.byteLength(JSON.stringify(entry));
      if (tools.length === 0 && entrySize > budget) {
        throw new Error(`Failed to add tool ${tool.name} because of payload size limit`);
      }
      if (size + entrySize > budget) return { tools, nextCursor: tool.name };
      tools.push(entry);
      size += entrySize;
    }
    return { tools };
  }

  private async call(params: Record<string, unknown>): Promise<unknown> {
    const name = params.name;
    if (typeof name !== 'string') throw new Error('Missing name');
    const tool = this.tools.get(name);
    if (!tool) throw new Error(`Unknown tool: ${name}`);
    const args = (
      typeof params.arguments === 'object' && params.arguments !== null ? params.arguments : {}
    ) as Record<string, unknown>;
    checkArgs(tool.inputSchema, args);
    const text = await tool.call(args);
    return { content: [{ type: 'text', text }], isError: false };
  }
}

/** The firmware checks required properties and primitive types before calling a tool. */
function checkArgs(schema: Record<string, unknown>, args: Record<string, unknown>): void {
  const properties = (schema.properties ?? {}) as Record<
    string,
    { type?: string; minimum?: number; maximum?: number }
  >;
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  for (const key of required) {
    if (!(key in args)) throw new Error(`Missing valid argument: ${key}`);
  }
  for (const [key, value] of Object.entries(args)) {
    const spec = properties[key];
    if (!spec?.type) continue;
    const ok =
      (spec.type === 'integer' && Number.isInteger(value)) ||
      (spec.type === 'number' && typeof value === 'number') ||
      (spec.type === 'string' && typeof value === 'string') ||
      (spec.type === 'boolean' && typeof value === 'boolean') ||
      (spec.type === 'array' && Array.isArray(value)) ||
      (spec.type === 'object' && typeof value === 'object' && value !== null && !Array.isArray(value));
    if (!ok) throw new Error(`Invalid argument type: ${key}`);
    if (typeof value === 'number' && spec.minimum !== undefined && value < spec.minimum) {
      throw new Error(`Argument out of range: ${key}`);
    }
    if (typeof value === 'number' && spec.maximum !== undefined && value > spec.maximum) {
      throw new Error(`Argument out of range: ${key}`);
    }
  }
}
