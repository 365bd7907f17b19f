// Liveness of the device socket (issue: py-xiaozhi pings every 20 s and was closed with 4002 idle): any inbound
// frame, a WebSocket ping included, resets the idle timer; a socket that sends nothing is closed at the timeout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestVoice, type TestVoice } from '../support/voice.js';

const IDLE_SEC = 1;
let t: TestVoice;

beforeAll(async () => {
  t = await startTestVoice({ server: { idle_timeout_sec: IDLE_SEC } });
});
afterAll(async () => {
  await t?.close();
});

/** A raw client like py-xiaozhi: identity in headers, a minimal hello, then only what the test sends. */
async function client(deviceId: string): Promise<{ socket: WebSocket; closed: Promise<number> }> {
  const socket = new WebSocket(`ws://127.0.0.1:${t.voice.wsPort}/device/v1/`, {
    headers: { 'Device-Id': deviceId, 'Client-Id': 'liveness-test', 'Protocol-Version': '1' },
    perMessageDeflate: false,
  });
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const hello = new Promise<void>((resolve) =>
    socket.on('message', (data, isBinary) => {
      if (!isBinary && JSON.parse(String(data)).type === 'hello') resolve();
    }),
  );
  socket.send(
    JSON.stringify({ type: 'hello', version: 1, transport: 'websocket', features: { mcp: false } }),
  );
  await hello;
  return { socket, closed };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the idle timer', () => {
  it('keeps a client that only pings open past idle_timeout_sec and closes a silent one with 4002', async () => {
    const pinging = await client('aa:00:00:00:00:01');
    const silent = await client('aa:00:00:00:00:02');
    let pongs = 0;
    pinging.socket.on('pong', () => pongs++);
    const silentClosedAt = silent.closed.then((code) => ({ code, at: performance.now() }));
    const startedAt = performance.now();
    const ping = setInterval(() => pinging.socket.ping(), 250);
    try {
      await sleep(IDLE_SEC * 1000 * 2.5);
      expect(pinging.socket.readyState).toBe(WebSocket.OPEN);
      expect(pongs).toBeGreaterThan(4);
      expect(t.voice.registry.get('aa:00:00:00:00:01')).toBeDefined();
      const { code, at } = await silentClosedAt;
      expect(code).toBe(4002);
      expect(at - startedAt).toBeLessThan(IDLE_SEC * 1000 * 2);
      expect(t.voice.registry.get('aa:00:00:00:00:02')).toBeUndefined();
    } finally {
      clearInterval(ping);
    }
    // Once the pings stop, the pinging client is idle like any other.
    expect(await pinging.closed).toBe(4002);
  }, 15_000);
});
