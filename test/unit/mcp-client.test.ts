// McpClient against an in-memory device: numeric ids, response matching, errors, timeouts, close,
// abort, notifications, tools/list paging and the page cap.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { McpClient, McpError, type McpTool, toolResultText } from '../../src/protocol/index.js';

type Sent = Record<string, unknown> & { id: number; method: string; params: Record<string, unknown> };

function setup(options: Partial<ConstructorParameters<typeof McpClient>[0]> = {}) {
  const sent: Sent[] = [];
  const client = new McpClient({ send: (payload) => sent.push(payload as Sent), ...options });
  return { client, sent };
}

async function mcpError(promise: Promise<unknown>): Promise<McpError> {
  const error = await promise.then(
    () => {
      throw new Error('expected the request to reject');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(McpError);
  return error as McpError;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('requests and responses', () => {
  it('sends JSON-RPC 2.0 with numeric ids that increment from 1', () => {
    const { client, sent } = setup();
    const ignore = () => {};
    client.request('initialize', { a: 1 }).catch(ignore);
    client.request('tools/list').catch(ignore);
    client.callTool('self.x', { v: 2 }).catch(ignore);
    expect(sent.map((m) => m.id)).toEqual([1, 2, 3]);
    expect(sent.every((m) => m.jsonrpc === '2.0' && Number.isInteger(m.id))).toBe(true);
    expect(sent[0]).toEqual({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { a: 1 } });
    expect(sent[1]?.params).toEqual({});
    expect(sent[2]).toMatchObject({ method: 'tools/call', params: { name: 'self.x', arguments: { v: 2 } } });
    client.close();
  });

  it('resolves each request with its own response, whatever the order', async () => {
    const { client } = setup();
    const first = client.request('a');
    const second = client.request('b');
    expect(client.handleMessage({ jsonrpc: '2.0', id: 2, result: 'for b' })).toBe(true);
    expect(client.handleMessage({ jsonrpc: '2.0', id: 1, result: { for: 'a' } })).toBe(true);
    await expect(first).resolves.toEqual({ for: 'a' });
    await expect(second).resolves.toBe('for b');
    expect(client.pendingCount).toBe(0);
  });

  it('ignores responses to unknown ids, string ids, duplicates and junk', async () => {
    const { client } = setup();
    const pending = client.request('a');
    for (const junk of [
      { jsonrpc: '2.0', id: 99, result: 1 },
      { jsonrpc: '2.0', id: '1', result: 1 },
      { jsonrpc: '2.0', id: null, error: { message: 'x' } },
      null,
      'text',
      42,
    ]) {
      expect(client.handleMessage(junk)).toBe(false);
    }
    expect(client.pendingCount).toBe(1);
    expect(client.handleMessage({ jsonrpc: '2.0', id: 1, result: 'ok' })).toBe(true);
    expect(client.handleMessage({ jsonrpc: '2.0', id: 1, result: 'again' })).toBe(false);
    await expect(pending).resolves.toBe('ok');
  });

  it('rejects with device_error and the message when the device error has only {message}', async () => {
    const { client } = setup();
    const pending = client.callTool('self.nope');
    client.handleMessage({ jsonrpc: '2.0', id: 1, error: { message: 'Unknown tool: self.nope' } });
    const error = await mcpError(pending);
    expect(error.code).toBe('device_error');
    expect(error.message).toBe('Unknown tool: self.nope');
    expect(error.rpcCode).toBeUndefined();
  });

  it('keeps a JSON-RPC error code when the device sends one', async () => {
    const { client } = setup();
    const pending = client.request('x');
    client.handleMessage({ jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } });
    expect(await mcpError(pending)).toMatchObject({ code: 'device_error', rpcCode: -32601 });
  });

  it('a send that throws rejects the request as closed', async () => {
    const client = new McpClient({
      send: () => {
        throw new Error('socket gone');
      },
    });
    const error = await mcpError(client.request('x'));
    expect(error.code).toBe('closed');
    expect(client.pendingCount).toBe(0);
  });
});

describe('timeouts, close and abort', () => {
  it('rejects with timeout after timeoutMs and forgets the request', async () => {
    vi.useFakeTimers();
    const { client } = setup({ timeoutMs: 500 });
    const pending = client.request('tools/list');
    const settled = vi.fn();
    pending.then(settled, settled);
    await vi.advanceTimersByTimeAsync(499);
    expect(settled).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    const error = await mcpError(pending);
    expect(error.code).toBe('timeout');
    expect(client.pendingCount).toBe(0);
    expect(client.handleMessage({ jsonrpc: '2.0', id: 1, result: 'late' })).toBe(false);
  });

  it('a per-request timeoutMs overrides the default', async () => {
    const { client } = setup({ timeoutMs: 60_000 });
    expect((await mcpError(client.request('x', {}, { timeoutMs: 5 }))).code).toBe('timeout');
  });

  it('close() rejects everything pending with closed, and later requests fail at once', async () => {
    const { client, sent } = setup();
    const a = client.request('a');
    const b = client.request('b');
    client.close('bye');
    const [errorA, errorB] = await Promise.all([mcpError(a), mcpError(b)]);
    expect(errorA).toMatchObject({ code: 'closed', message: 'bye' });
    expect(errorB).toMatchObject({ code: 'closed', message: 'bye' });
    expect(client.pendingCount).toBe(0);
    expect((await mcpError(client.request('c'))).code).toBe('closed');
    expect(sent).toHaveLength(2);
  });

  it('an abort signal rejects with aborted; an already-aborted signal sends nothing', async () => {
    const { client, sent } = setup();
    const controller = new AbortController();
    const pending = client.callTool('self.slow', {}, { signal: controller.signal });
    controller.abort();
    expect((await mcpError(pending)).code).toBe('aborted');
    expect(client.pendingCount).toBe(0);
    expect((await mcpError(client.request('x', {}, { signal: controller.signal }))).code).toBe('aborted');
    expect(sent).toHaveLength(1);
  });
});

describe('device-initiated messages', () => {
  it('passes notifications to onNotification and sends no reply', () => {
    const onNotification = vi.fn();
    const { client, sent } = setup({ onNotification });
    expect(
      client.handleMessage({ jsonrpc: '2.0', method: 'notifications/state', params: { s: 'idle' } }),
    ).toBe(true);
    expect(onNotification).toHaveBeenCalledWith('notifications/state', { s: 'idle' });
    expect(sent).toHaveLength(0);
  });

  it('does not treat a device request (method with id) as a notification', () => {
    const onNotification = vi.fn();
    const { client, sent } = setup({ onNotification });
    expect(client.handleMessage({ jsonrpc: '2.0', id: 5, method: 'ping' })).toBe(false);
    expect(onNotification).not.toHaveBeenCalled();
    expect(sent).toHaveLength(0);
  });
});

describe('listTools', () => {
  const tool = (name: string): McpTool => ({
    name,
    description: `does ${name}`,
    inputSchema: { type: 'object' },
  });

  /** Answers each request on a microtask, as a device would, from a page function. */
  function device(pageFor: (cursor: string, withUserTools: boolean) => unknown, options = {}) {
    const requests: Sent[] = [];
    const client: McpClient = new McpClient({
      ...options,
      send: (payload) => {
        const message = payload as Sent;
        requests.push(message);
        const { cursor, withUserTools } = message.params as { cursor: string; withUserTools: boolean };
        queueMicrotask(() =>
          client.handleMessage({ jsonrpc: '2.0', id: message.id, result: pageFor(cursor, withUserTools) }),
        );
      },
    });
    return { client, requests };
  }

  it('follows nextCursor across three pages and passes withUserTools on every page', async () => {
    const pages: Record<string, unknown> = {
      '': { tools: [tool('a'), tool('b')], nextCursor: 'c' },
      c: { tools: [tool('c')], nextCursor: 'd' },
      d: { tools: [tool('d'), tool('e')] },
    };
    const { client, requests } = device((cursor) => pages[cursor]);
    const tools = await client.listTools(true);
    expect(tools.map((t) => t.name)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(tools[0]).toEqual(tool('a'));
    expect(requests.map((r) => r.params)).toEqual([
      { cursor: '', withUserTools: true },
      { cursor: 'c', withUserTools: true },
      { cursor: 'd', withUserTools: true },
    ]);
    expect(requests.map((r) => r.id)).toEqual([1, 2, 3]);
  });

  it('defaults withUserTools to false and fills missing description/inputSchema', async () => {
    const { client, requests } = device(() => ({ tools: [{ name: 'bare' }] }));
    expect(await client.listTools()).toEqual([
      { name: 'bare', description: '', inputSchema: { type: 'object', properties: {} } },
    ]);
    expect(requests[0]?.params).toEqual({ cursor: '', withUserTools: false });
  });

  it('stops a device that loops its cursor forever at maxPages', async () => {
    const { client, requests } = device(() => ({ tools: [tool('same')], nextCursor: 'same' }), {
      maxPages: 5,
    });
    expect(await mcpError(client.listTools())).toMatchObject({ code: 'bad_result' });
    expect(requests).toHaveLength(5);
  });

  it('rejects a result without a tools array as bad_result', async () => {
    const { client } = device(() => ({ items: [] }));
    expect((await mcpError(client.listTools())).code).toBe('bad_result');
  });
});

describe('toolResultText', () => {
  it.each<[string, unknown, string]>([
    ['text content', { content: [{ type: 'text', text: 'done' }], isError: false }, 'done'],
    [
      'several parts',
      { content: [{ type: 'text', text: 'a' }, { type: 'image', data: 'x' }, { text: 'b' }] },
      'ab',
    ],
    ['empty content', { content: [] }, ''],
    ['no content array', { ok: true }, '{"ok":true}'],
    ['string', 'plain', 'plain'],
    ['number', 5, '5'],
    ['null', null, ''],
    ['undefined', undefined, ''],
  ])('%s', (_name, result, text) => {
    expect(toolResultText(result)).toBe(text);
  });
});
