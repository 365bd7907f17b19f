// Connection limits of the voice server's two listeners, over real sockets: the device WebSocket listener
// (per-address and total caps, refused before the 101; slowloris closed by the header timeout; an upgraded
// session outliving the request timeout; the hello deadline) and the shared fastify app (same caps and
// timeouts). Every refusal must show in deskbot_voice_limit_refusals_total{limit}. Distinct source
// addresses come from 127.0.0.0/8 (Linux routes the whole block to loopback).
import type { Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DEFAULT_LIMITS, type Limits, parseConfig } from '../../src/config/index.js';
import { createHttpApp, MAX_AWAITING_REFUSAL } from '../../src/util/http-app.js';
import { silentLogger } from '../../src/util/log.js';
import { VoiceMetrics } from '../../src/voice/metrics.js';
import { DeviceSession } from '../../src/voice/session.js';
import { createWsListener } from '../../src/voice/ws-listener.js';
import { parsePrometheus } from '../support/prom.js';

const MAC = 'aa:bb:cc:dd:ee:01';
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function refusals(metrics: VoiceMetrics, limit: string): Promise<number> {
  const scrape = parsePrometheus((await metrics.text()).body);
  return scrape.value('deskbot_voice_limit_refusals_total', { limit });
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

function startListener(limits: Partial<Limits>, helloTimeoutMs = 60_000) {
  const metrics = new VoiceMetrics(() => 0);
  const sessions: DeviceSession[] = [];
  const server = createWsListener({
    logger: silentLogger,
    limits,
    onLimit: (limit) => metrics.limitHit(limit),
    onConnection: (socket, info) => {
      const session = new DeviceSession(socket, info, {
        logger: silentLogger,
        serverVersion: 'test',
        visionUrl: 'http://127.0.0.1:9/mcp/vision/explain',
        helloTimeoutMs,
        idleTimeoutMs: 60_000,
        maxFrameBytes: 65_536,
        mcpTimeoutMs: 2000,
        downlinkSampleRate: 24_000,
        downlinkFrameMs: 60,
        maxTools: 3,
        maxToolListBytes: 64 * 1024,
        onLimit: (limit) => metrics.limitHit(limit),
      });
      sessions.push(session);
    },
  });
  closers.push(() => server.closeAllConnections());
  return { server, metrics, sessions };
}

/** A raw TCP connection from `from`, open once connected (it sends nothing unless told). */
function rawSocket(port: number, from = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress: from }, () => resolve(socket));
    socket.on('error', reject);
    closers.push(() => socket.destroy());
  });
}

/** Opens a device WebSocket from `from`; resolves 101 with the socket, or the refusal's status and body. */
function upgrade(
  port: number,
  from = '127.0.0.1',
): Promise<{ status: number; body: string; ws?: WebSocket }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/device/v1/`, {
      headers: { 'device-id': MAC, 'client-id': 'c1' },
      localAddress: from,
    });
    closers.push(() => ws.terminate());
    ws.on('open', () => resolve({ status: 101, body: '', ws }));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on('error', reject);
  });
}

const closedWithin = (socket: Socket, ms: number) =>
  new Promise<{ closed: boolean; data: string }>((resolve) => {
    let data = '';
    socket.on('data', (chunk) => {
      data += chunk;
    });
    const timer = setTimeout(() => resolve({ closed: false, data }), ms);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ closed: true, data });
    });
  });

describe('device WebSocket listener limits', () => {
  it('refuses the upgrade past the per-address cap with 503 too_many_connections, other addresses still in', async () => {
    const { server, metrics } = startListener({ ws_max_connections_per_address: 2 });
    const port = await listen(server);
    await rawSocket(port, '127.0.0.2');
    await rawSocket(port, '127.0.0.2');
    const refused = await upgrade(port, '127.0.0.2');
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toEqual({
      error: { code: 'too_many_connections', message: expect.any(String) },
    });
    expect(await refusals(metrics, 'ws_connections_per_address')).toBe(1);
    expect((await upgrade(port, '127.0.0.3')).status).toBe(101);
  });

  it('frees the slot when a connection closes', async () => {
    const { server } = startListener({ ws_max_connections_per_address: 1 });
    const port = await listen(server);
    const first = await upgrade(port, '127.0.0.4');
    expect(first.status).toBe(101);
    expect((await upgrade(port, '127.0.0.4')).status).toBe(503);
    const closed = new Promise((resolve) => first.ws!.on('close', resolve));
    first.ws!.close();
    await closed;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await upgrade(port, '127.0.0.4')).status).toBe(101);
  });

  it('caps all addresses together: silent sockets make room for a newcomer, talking ones do not', async () => {
    const { server, metrics } = startListener({ ws_max_connections: 2, over_limit_grace_ms: 200 });
    const port = await listen(server);
    // Two sockets that never send a byte (spread over addresses, under the per-address cap) fill the total.
    const oldest = await rawSocket(port, '127.0.0.5');
    const older = await rawSocket(port, '127.0.0.6');
    const oldestClosed = closedWithin(oldest, 2000);
    // A real device still gets in: the oldest silent socket is closed for it.
    const first = await upgrade(port, '127.0.0.7');
    expect(first.status).toBe(101);
    expect((await oldestClosed).closed).toBe(true);
    const olderClosed = closedWithin(older, 2000);
    const second = await upgrade(port, '127.0.0.8');
    expect(second.status).toBe(101);
    expect((await olderClosed).closed).toBe(true);
    // Now both slots hold devices that spoke: a third is refused, and an over-cap idle socket is dropped.
    expect((await upgrade(port, '127.0.0.9')).status).toBe(503);
    const idle = await rawSocket(port, '127.0.0.10');
    expect((await closedWithin(idle, 2000)).closed).toBe(true);
    expect(await refusals(metrics, 'ws_connections')).toBe(2);
  });

  it('holds at most MAX_AWAITING_REFUSAL over-cap sockets for their 503; the rest are closed at once', async () => {
    // A long grace: only the bound can close the extra sockets within the test.
    const { server } = startListener({ ws_max_connections_per_address: 1, over_limit_grace_ms: 60_000 });
    const port = await listen(server);
    await rawSocket(port, '127.0.0.11');
    const flood = await Promise.all(
      Array.from({ length: MAX_AWAITING_REFUSAL + 8 }, () => rawSocket(port, '127.0.0.11')),
    );
    const outcomes = await Promise.all(flood.map((socket) => closedWithin(socket, 1500)));
    expect(outcomes.filter((o) => o.closed).length).toBe(8);
    // With room again among the held ones, an over-cap upgrade gets its 503 answer.
    const held = flood.filter((_socket, i) => !outcomes[i]!.closed);
    await new Promise<void>((resolve) => {
      held[0]!.once('close', () => setTimeout(resolve, 50));
      held[0]!.destroy();
    });
    expect((await upgrade(port, '127.0.0.11')).status).toBe(503);
  });

  it('closes a slowloris connection with 408 in the error shape, but never an upgraded session', async () => {
    const limits = {
      http_headers_timeout_ms: 300,
      http_request_timeout_ms: 300,
      http_connections_check_interval_ms: 50,
    };
    const { server, metrics } = startListener(limits);
    const port = await listen(server);
    const session = await upgrade(port);
    expect(session.status).toBe(101);
    const slow = await rawSocket(port);
    slow.write('GET /device/v1/ HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => slow.writable && slow.write('X-A: b\r\n'), 50);
    const result = await closedWithin(slow, 3000);
    clearInterval(trickle);
    expect(result.closed).toBe(true);
    expect(result.data).toMatch(/^HTTP\/1\.1 408 /);
    expect(result.data).toContain('"code":"request_timeout"');
    expect(await refusals(metrics, 'request_timeout')).toBeGreaterThanOrEqual(1);
    // The upgraded socket is well past both timeouts and still open.
    expect(session.ws!.readyState).toBe(WebSocket.OPEN);
  });

  it('closes a device that never says hello with 4000 and counts it', async () => {
    const { server, metrics } = startListener({}, 150);
    const port = await listen(server);
    const { ws } = await upgrade(port);
    const code = await new Promise<number>((resolve) => ws!.on('close', resolve));
    expect(code).toBe(4000);
    expect(await refusals(metrics, 'hello_timeout')).toBe(1);
  });

  it('has a pre-hello deadline of 10 s by default, matching the firmware', () => {
    expect(parseConfig({}).server.hello_timeout_sec).toBe(10);
    expect(parseConfig({}).limits).toEqual(DEFAULT_LIMITS);
  });

  it('keeps at most maxTools MCP tools, stops paging, and counts the cut once', async () => {
    const { server, metrics, sessions } = startListener({});
    const port = await listen(server);
    const { ws } = await upgrade(port);
    const pagesAsked: unknown[] = [];
    ws!.on('message', (data) => {
      const frame = JSON.parse(String(data));
      if (frame.type !== 'mcp') return;
      const { id, method, params } = frame.payload;
      if (method === 'initialize') {
        ws!.send(JSON.stringify({ type: 'mcp', payload: { jsonrpc: '2.0', id, result: {} } }));
        return;
      }
      pagesAsked.push(params.cursor);
      // Endless pages of two tools each: only the cap ends the walk.
      const page = pagesAsked.length;
      const tools = [0, 1].map((i) => ({ name: `self.t${page}_${i}`, description: 'x', inputSchema: {} }));
      ws!.send(
        JSON.stringify({
          type: 'mcp',
          payload: { jsonrpc: '2.0', id, result: { tools, nextCursor: `c${page}` } },
        }),
      );
    });
    ws!.send(JSON.stringify({ type: 'hello', version: 1, features: { mcp: true }, transport: 'websocket' }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const session = sessions[0]!;
    await session.offersTool('none', 3000);
    expect(session.tools.map((t) => t.name)).toEqual(['self.t1_0', 'self.t1_1', 'self.t2_0']);
    // Two pages per list (4 tools seen ≥ 3): never a third page for either list.
    expect(pagesAsked).toHaveLength(4);
    expect(await refusals(metrics, 'mcp_tools')).toBe(2);
  });
});

describe('HTTP app limits (voice :8003 and bridge :8080 share createHttpApp)', () => {
  async function startApp(limits: Partial<Limits>) {
    const metrics = new VoiceMetrics(() => 0);
    const app = createHttpApp({ logger: silentLogger, limits, onLimit: (limit) => metrics.limitHit(limit) });
    app.get('/ping', async () => ({ ok: true }));
    app.post('/echo', async (request) => request.body);
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    return { port: (app.server.address() as AddressInfo).port, metrics };
  }

  const get = (port: number, from: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const socket = connect({ port, host: '127.0.0.1', localAddress: from }, () =>
        socket.write('GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
      );
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk;
      });
      socket.on('close', () =>
        resolve({ status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) }),
      );
      socket.on('error', reject);
    });

  it('answers 503 too_many_connections past the per-address cap and counts it', async () => {
    const { port, metrics } = await startApp({ http_max_connections_per_address: 2 });
    await rawSocket(port, '127.0.0.9');
    await rawSocket(port, '127.0.0.9');
    const refused = await get(port, '127.0.0.9');
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body).error.code).toBe('too_many_connections');
    expect((await get(port, '127.0.0.10')).status).toBe(200);
    expect(await refusals(metrics, 'http_connections_per_address')).toBe(1);
  });

  it('closes a trickled body with 408 and an idle keep-alive connection after its timeout', async () => {
    const { port, metrics } = await startApp({
      http_headers_timeout_ms: 200,
      http_request_timeout_ms: 400,
      http_keep_alive_timeout_ms: 200,
      http_connections_check_interval_ms: 50,
    });
    const slow = await rawSocket(port);
    slow.write(
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
    );
    const trickle = setInterval(() => slow.writable && slow.write(' '), 50);
    const result = await closedWithin(slow, 3000);
    clearInterval(trickle);
    expect(result.closed).toBe(true);
    expect(result.data).toMatch(/^HTTP\/1\.1 408 /);
    expect(await refusals(metrics, 'request_timeout')).toBe(1);

    const idle = await rawSocket(port);
    idle.write('GET /ping HTTP/1.1\r\nHost: x\r\n\r\n');
    const after = await closedWithin(idle, 3000);
    expect(after.closed).toBe(true);
    expect(after.data).toMatch(/^HTTP\/1\.1 200 /);
  });
});
