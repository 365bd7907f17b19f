// The bridge's perception limits over real sockets: the event route's own body limit (8 KiB) and its cap on
// keys and nesting (checked before validation, so a hostile event is cheap), each answered in the error
// shape and counted by the bridge's existing deskbot_http_request_errors_total; and the dashboard stream's
// per-address cap, where a new stream closes the oldest of its address instead of locking the page out.
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeMetrics } from '../../src/bridge/metrics.js';
import {
  createPerception,
  type Perception,
  registerPerceptionRoutes,
} from '../../src/bridge/perception/index.js';
import { DEFAULT_LIMITS } from '../../src/config/index.js';
import { createHttpApp } from '../../src/util/http-app.js';
import { silentLogger } from '../../src/util/log.js';
import { parsePrometheus } from '../support/prom.js';

const noVoice = {
  inject: () => undefined,
  abort: () => undefined,
  setHeadAngles: () => undefined,
  setFaceIdentified: () => undefined,
  playPurr: () => undefined,
};

let perception: Perception | undefined;
let close: (() => Promise<unknown>) | undefined;
afterEach(async () => {
  await close?.();
  perception = undefined;
});

async function start() {
  perception = createPerception({ voice: noVoice });
  const app = createHttpApp({ logger: silentLogger, bodyLimit: 1024 * 1024 });
  const metrics = new BridgeMetrics({ acpSessions: () => 0, perceptionDropped: () => 0 });
  metrics.instrument(app);
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await metrics.text();
    return reply.type(contentType).send(body);
  });
  registerPerceptionRoutes(app, perception);
  await app.listen({ host: '127.0.0.1', port: 0 });
  close = () => app.close();
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** An event whose JSON is exactly `bytes` long (data.pad takes up the rest). */
function eventOfSize(bytes: number): string {
  const shell = JSON.stringify({ name: 'sound_event', device_id: 'dev-1', data: { pad: '' } });
  return shell.replace('"pad":""', `"pad":"${'x'.repeat(bytes - shell.length)}"`);
}

const post = (base: string, body: string) =>
  fetch(`${base}/api/perception/event`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });

describe('POST /api/perception/event limits', () => {
  it('takes an event of exactly 8 KiB and refuses one byte more with 413 body_too_large', async () => {
    const base = await start();
    const limit = DEFAULT_LIMITS.perception_event_max_bytes;
    expect(limit).toBe(8192);
    expect((await post(base, eventOfSize(limit))).status).toBe(200);
    const over = await post(base, eventOfSize(limit + 1));
    expect(over.status).toBe(413);
    expect(await over.json()).toEqual({ error: { code: 'body_too_large', message: expect.any(String) } });
  });

  it('refuses too many keys or too deep a nesting with 413 body_too_complex, in little time, and counts both', async () => {
    const base = await start();
    const manyKeys = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i]));
    const atKeys = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, i]));
    const event = (data: unknown) => JSON.stringify({ name: 'sound_event', device_id: 'dev-1', data });
    expect((await post(base, event(atKeys))).status).toBe(200);
    const started = performance.now();
    const keys = await post(base, event(manyKeys));
    expect(performance.now() - started).toBeLessThan(500);
    expect(keys.status).toBe(413);
    expect(((await keys.json()) as { error: unknown }).error).toEqual({
      code: 'body_too_complex',
      message: 'data: more than 64 keys and items',
    });
    expect((await post(base, event({ a: { b: { c: 1 } } }))).status).toBe(200);
    const deep = await post(base, event({ a: { b: { c: { d: { e: 1 } } } } }));
    expect(deep.status).toBe(413);
    expect(((await deep.json()) as { error: { code: string } }).error.code).toBe('body_too_complex');

    const scrape = parsePrometheus(await (await fetch(`${base}/metrics`)).text());
    const labels = { method: 'POST', route: '/api/perception/event', status: '413' };
    expect(scrape.value('deskbot_http_request_errors_total', labels)).toBe(2);
  });
});

describe('dashboard stream per-address cap', () => {
  async function open(base: string) {
    const controller = new AbortController();
    const response = await fetch(`${base}/api/perception/stream`, { signal: controller.signal });
    const reader = response.body!.getReader();
    let ended = false;
    const ends = (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {
        // aborted by the test
      }
      ended = true;
    })();
    return { status: response.status, ended: () => ended, ends, abort: () => controller.abort() };
  }

  it('closes the oldest stream of an address for a new one, so a reloading page is never locked out', async () => {
    const base = await start();
    const cap = DEFAULT_LIMITS.sse_max_streams_per_address;
    const streams = [];
    for (let i = 0; i < cap; i++) streams.push(await open(base));
    expect(perception!.sse.clientCount).toBe(cap);
    // Sixteen reloads, more than the hub's 16 streams in total: every one is let in.
    for (let i = 0; i < 16; i++) {
      const next = await open(base);
      expect(next.status).toBe(200);
      streams.push(next);
    }
    await Promise.all(streams.slice(0, -cap).map((s) => s.ends));
    expect(streams.slice(0, -cap).every((s) => s.ended())).toBe(true);
    expect(streams.slice(-cap).some((s) => s.ended())).toBe(false);
    expect(perception!.sse.clientCount).toBe(cap);
    expect(perception!.sse.stats().evicted).toBe(16);
    for (const s of streams) s.abort();
  });
});
