// DeviceMcpServer, the virtual robot's side of MCP, as the firmware behaves (DESIGN §4): numeric ids
// only, paging by payload size with nextCursor = next tool's name, user-only tools, errors with only message.
import { describe, expect, it, vi } from 'vitest';
import { DeviceMcpServer, type DeviceTool } from '../../src/device/mcp-server.js';
import { buildTools, initialModel } from '../../src/device/tools.js';
import { McpClient } from '../../src/protocol/index.js';

const tool = (name: string, extra: Partial<DeviceTool> = {}): DeviceTool => ({
  name,
  description: `Tool ${name}.`,
  inputSchema: { type: 'object', properties: {} },
  call: () => `${name} done`,
  ...extra,
});

function server(tools: DeviceTool[], options: ConstructorParameters<typeof DeviceMcpServer>[0] = {}) {
  const s = new DeviceMcpServer(options);
  for (const t of tools) s.add(t);
  return s;
}

/** The reply, asserted present. */
function answered(reply: Record<string, unknown> | null): Record<string, unknown> {
  expect(reply).not.toBeNull();
  return reply as Record<string, unknown>;
}

const rpc = (id: unknown, method: string, params?: unknown) => ({ jsonrpc: '2.0', id, method, params });

type Page = {
  tools: Array<{ name: string; description: string; inputSchema: unknown }>;
  nextCursor?: string;
};

async function pages(s: DeviceMcpServer, withUserTools: boolean): Promise<Page[]> {
  const out: Page[] = [];
  let cursor = '';
  for (let i = 0; i < 100; i++) {
    const reply = await s.handle(rpc(i + 1, 'tools/list', { cursor, withUserTools }));
    const page = reply?.result as Page;
    out.push(page);
    if (!page.nextCursor) return out;
    cursor = page.nextCursor;
  }
  throw new Error('tools/list did not end');
}

describe('messages the firmware stays silent on', () => {
  const s = server([tool('self.a')]);
  it.each([
    ['string id', rpc('1', 'tools/list')],
    ['missing id', { jsonrpc: '2.0', method: 'tools/list' }],
    ['null id', rpc(null, 'tools/list')],
    ['notification', { jsonrpc: '2.0', method: 'notifications/initialized' }],
    ['notification with a numeric id', rpc(4, 'notifications/cancelled')],
    ['no method', { jsonrpc: '2.0', id: 1, result: {} }],
    ['numeric method', { jsonrpc: '2.0', id: 1, method: 5 }],
  ])('%s → null', async (_name, message) => {
    expect(await s.handle(message as Record<string, unknown>)).toBeNull();
  });
});

describe('initialize', () => {
  it('passes params to onInitialize and returns serverInfo', async () => {
    const onInitialize = vi.fn();
    const s = server([], { onInitialize, serverInfo: { name: 'pip-board', version: '1.2.3' } });
    const params = {
      protocolVersion: '2024-11-05',
      capabilities: { vision: { url: 'http://x/v', token: 't' } },
    };
    const reply = await s.handle(rpc(1, 'initialize', params));
    expect(onInitialize).toHaveBeenCalledWith(params);
    expect(reply).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: {
        protocolVersion: '2024-11-05',
        capabilities: { tools: {} },
        serverInfo: { name: 'pip-board', version: '1.2.3' },
      },
    });
  });

  it('has a default serverInfo', async () => {
    const reply = await server([]).handle(rpc(9, 'initialize', {}));
    expect(reply).toMatchObject({ id: 9, result: { serverInfo: { name: expect.any(String) } } });
  });
});

describe('tools/list paging', () => {
  const many = Array.from({ length: 12 }, (_, i) =>
    tool(`self.tool_${String(i).padStart(2, '0')}`, { description: 'x'.repeat(20 + i * 15) }),
  );

  it.each([300, 600, 100_000])(
    'pageBytes %i: every tool exactly once, cursors name the next tool',
    async (pageBytes) => {
      const list = await pages(server(many, { pageBytes }), false);
      const names = list.flatMap((p) => p.tools.map((t) => t.name));
      expect(names).toEqual(many.map((t) => t.name));
      list.forEach((page, i) => {
        expect(page.tools.length).toBeGreaterThan(0);
        const next = list[i + 1];
        if (next) expect(page.nextCursor).toBe(next.tools[0]?.name);
        else expect('nextCursor' in page).toBe(false);
      });
      if (pageBytes === 100_000) expect(list).toHaveLength(1);
      if (pageBytes === 300) expect(list.length).toBeGreaterThanOrEqual(4);
    },
  );

  it('refuses, as the firmware does, a tool that alone exceeds the page budget', async () => {
    const reply = await server(many, { pageBytes: 50 }).handle(rpc(3, 'tools/list', { cursor: '' }));
    expect(reply).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: { message: expect.stringMatching(/payload size limit/) },
    });
  });

  it('keeps a page within pageBytes (sum of tool entries)', async () => {
    const pageBytes = 300;
    for (const page of await pages(server(many, { pageBytes }), false)) {
      const size = page.tools.reduce((sum, t) => sum + JSON.stringify(t).length, 0);
      if (page.tools.length > 1) expect(size).toBeLessThanOrEqual(pageBytes);
    }
  });

  it('counts the budget in UTF-8 bytes, as the firmware (std::string length) does', async () => {
    // Each entry is ~235 UTF-16 units but ~535 UTF-8 bytes: by length two fit in 800, by bytes they do not.
    const wide = [
      tool('self.wide_a', { description: '设'.repeat(150) }),
      tool('self.wide_b', { description: '备'.repeat(150) }),
    ];
    const list = await pages(server(wide, { pageBytes: 800 }), false);
    for (const page of list) {
      const bytes = page.tools.reduce((sum, t) => sum + Buffer.byteLength(JSON.stringify(t)), 0);
      if (page.tools.length > 1) expect(bytes).toBeLessThanOrEqual(800);
    }
    expect(list).toHaveLength(2);
  });

  it('lists user-only tools only with withUserTools:true', async () => {
    const s = server([tool('self.a'), tool('self.reboot', { userOnly: true }), tool('self.b')]);
    const names = async (withUserTools: unknown) =>
      (
        answered(await s.handle(rpc(1, 'tools/list', { cursor: '', withUserTools }))).result as Page
      ).tools.map((t) => t.name);
    expect(await names(false)).toEqual(['self.a', 'self.b']);
    expect(await names('true')).toEqual(['self.a', 'self.b']);
    expect(await names(true)).toEqual(['self.a', 'self.reboot', 'self.b']);
  });

  it('entries carry name, description and inputSchema only', async () => {
    const reply = await server([tool('self.a', { userOnly: false })]).handle(rpc(1, 'tools/list', {}));
    expect((answered(reply).result as Page).tools).toEqual([
      { name: 'self.a', description: 'Tool self.a.', inputSchema: { type: 'object', properties: {} } },
    ]);
  });

  it('an unknown cursor is an error with only a message', async () => {
    const reply = await server([tool('self.a')]).handle(rpc(3, 'tools/list', { cursor: 'self.zzz' }));
    expect(reply).toEqual({ jsonrpc: '2.0', id: 3, error: { message: expect.stringContaining('self.zzz') } });
  });
});

describe('tools/call', () => {
  const setVolume = tool('self.audio_speaker.set_volume', {
    inputSchema: {
      type: 'object',
      properties: { volume: { type: 'integer', minimum: 0, maximum: 100 }, fade: { type: 'boolean' } },
      required: ['volume'],
    },
    call: (args) => `volume ${String(args.volume)}`,
  });
  const s = server([
    setVolume,
    tool('self.say', {
      inputSchema: { type: 'object', properties: { text: { type: 'string' }, ratio: { type: 'number' } } },
    }),
    tool('self.broken', {
      call: () => {
        throw new Error('servo stalled');
      },
    }),
  ]);
  const call = (name: unknown, args?: unknown) => s.handle(rpc(7, 'tools/call', { name, arguments: args }));

  it('calls the tool and returns its text as content', async () => {
    expect(await call('self.audio_speaker.set_volume', { volume: 40 })).toEqual({
      jsonrpc: '2.0',
      id: 7,
      result: { content: [{ type: 'text', text: 'volume 40' }], isError: false },
    });
    expect((await call('self.say', { text: 'hi', ratio: 0.5 }))?.result).toBeDefined();
  });

  it.each<[string, unknown, unknown, RegExp]>([
    ['missing required', 'self.audio_speaker.set_volume', {}, /Missing valid argument: volume/],
    ['no arguments at all', 'self.audio_speaker.set_volume', undefined, /volume/],
    [
      'string for integer',
      'self.audio_speaker.set_volume',
      { volume: '40' },
      /Invalid argument type: volume/,
    ],
    ['fraction for integer', 'self.audio_speaker.set_volume', { volume: 40.5 }, /volume/],
    ['number for boolean', 'self.audio_speaker.set_volume', { volume: 4, fade: 1 }, /fade/],
    ['number for string', 'self.say', { text: 5 }, /text/],
    ['below minimum', 'self.audio_speaker.set_volume', { volume: -1 }, /out of range: volume/],
    ['above maximum', 'self.audio_speaker.set_volume', { volume: 101 }, /out of range: volume/],
    ['unknown tool', 'self.nope', {}, /Unknown tool: self.nope/],
    ['missing name', undefined, {}, /name/i],
    ['tool throws', 'self.broken', {}, /servo stalled/],
  ])('%s → error with only message', async (_case, name, args, message) => {
    const reply = answered(await call(name, args));
    expect(reply).toMatchObject({ jsonrpc: '2.0', id: 7 });
    expect('result' in reply).toBe(false);
    expect(Object.keys(reply.error as object)).toEqual(['message']);
    expect((reply.error as { message: string }).message).toMatch(message);
  });

  it('range limits are inclusive', async () => {
    expect((await call('self.audio_speaker.set_volume', { volume: 0 }))?.result).toBeDefined();
    expect((await call('self.audio_speaker.set_volume', { volume: 100 }))?.result).toBeDefined();
  });

  it('an unknown method is an error naming it', async () => {
    expect(await s.handle(rpc(8, 'resources/list', {}))).toEqual({
      jsonrpc: '2.0',
      id: 8,
      error: { message: 'Method not implemented: resources/list' },
    });
  });
});

describe('McpClient ⇄ DeviceMcpServer in memory', () => {
  function connect(s: DeviceMcpServer, log: Array<Record<string, unknown>> = []) {
    const client: McpClient = new McpClient({
      send: (payload) => {
        log.push(payload);
        void s.handle(payload).then((reply) => {
          if (reply) client.handleMessage(reply);
        });
      },
    });
    return client;
  }
  const entries = (tools: DeviceTool[]) =>
    tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));

  it.each([false, true])(
    'listTools(%s) returns exactly the server list over several pages',
    async (withUser) => {
      const s = server(buildTools(initialModel()), { pageBytes: 700 });
      const requests: Array<Record<string, unknown>> = [];
      const listed = await connect(s, requests).listTools(withUser);
      expect(listed).toEqual(entries(s.list(withUser)));
      expect(requests.length).toBeGreaterThan(1);
      expect(requests.every((r) => (r.params as { withUserTools: unknown }).withUserTools === withUser)).toBe(
        true,
      );
      expect(s.list(true).length).toBeGreaterThan(s.list(false).length);
    },
  );

  it('callTool reaches the tool and device errors come back as McpError device_error', async () => {
    const client = connect(server([tool('self.a')]));
    expect(await client.callTool('self.a')).toEqual({
      content: [{ type: 'text', text: 'self.a done' }],
      isError: false,
    });
    await expect(client.callTool('self.b')).rejects.toMatchObject({
      code: 'device_error',
      message: 'Unknown tool: self.b',
    });
  });
});
