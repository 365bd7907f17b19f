// CORS on the voice server's device-facing HTTP routes. Browser clients (the xiaozhi-esp32-server test page) are
// served from another origin and send Device-Id/Client-Id headers, so every boot, activation, firmware and vision
// call of theirs is preceded by a preflight, and the browser hides any reply without Access-Control-Allow-Origin.
// The admin surface must stay invisible to browser pages: no CORS headers at all. The device-facing routes are
// taken from fastify's own route list (test/support/route-recorder.ts), so a new one without CORS fails here.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { request } from '../support/http.js';
import { startTestVoice, type TestVoice } from '../support/voice.js';

const seen = vi.hoisted(() => ({ routes: new Set<string>() }));
vi.mock('../../src/util/http-app.js', async (importOriginal) => {
  const { withRouteRecorder } = await import('../support/route-recorder.js');
  return withRouteRecorder(await importOriginal(), seen.routes);
});

const ORIGIN = 'http://localhost:8006';
/**
 * The request headers real clients send on these routes (each client's ota.json under test/fixtures/clients/, and
 * the vision upload's authorization). `agent-id`: the browser page's xiaoZhiConnect.js variant sends Agent-Id.
 */
const CLIENT_HEADERS = [
  ...['content-type', 'device-id', 'client-id', 'activation-version', 'authorization'],
  ...['accept-language', 'user-agent', 'agent-id'],
];
const DEVICE = 'AA:BB:CC:00:11:22';

let t: TestVoice;
beforeAll(async () => {
  t = await startTestVoice();
}, 60_000);
afterAll(() => t?.close());

/** Registered "METHOD /route" pairs, without preflight routes. */
const registered = () => [...seen.routes].filter((route) => !route.startsWith('OPTIONS '));
const concrete = (route: string) => route.replace(':file', 'deskbot_1.0.0.bin');
const deviceFacing = () =>
  [
    ...new Set(
      registered()
        .map((route) => route.split(' ')[1]!)
        .filter((path) => !path.startsWith('/device/admin/') && path !== '/metrics'),
    ),
  ].sort();
const methodsOf = (path: string) =>
  registered()
    .filter((route) => route.endsWith(` ${path}`))
    .map((route) => route.split(' ')[0]!);
const listOf = (value: string | null) => (value ?? '').split(',').map((item) => item.trim().toLowerCase());

const preflight = (path: string, method: string) =>
  request(t.httpUrl, 'OPTIONS', path, undefined, {
    origin: ORIGIN,
    'access-control-request-method': method,
    'access-control-request-headers': CLIENT_HEADERS.join(', '),
  });

describe('device-facing routes', () => {
  it('are the boot, activation, firmware download and vision routes (taken from fastify itself)', () => {
    expect(deviceFacing()).toEqual([
      '/device/ota/',
      '/device/ota/activate',
      '/device/ota/firmware/:file',
      '/mcp/vision/explain',
    ]);
  });

  it('answer a preflight with 204, the origin, their methods and every header real clients send', async () => {
    for (const path of deviceFacing()) {
      for (const method of methodsOf(path)) {
        const reply = await preflight(concrete(path), method);
        expect(reply.status, `OPTIONS ${path} for ${method}: ${reply.text}`).toBe(204);
        expect(['*', ORIGIN], `${path} allow-origin`).toContain(
          reply.headers.get('access-control-allow-origin'),
        );
        expect(listOf(reply.headers.get('access-control-allow-methods')), `${path} allow-methods`).toContain(
          method.toLowerCase(),
        );
        const allowed = listOf(reply.headers.get('access-control-allow-headers'));
        for (const header of CLIENT_HEADERS) expect(allowed, `${path} allow-headers`).toContain(header);
      }
    }
  });

  it('put Access-Control-Allow-Origin on their replies, errors included', async () => {
    const cross = { origin: ORIGIN };
    const replies = [
      await request(
        t.httpUrl,
        'POST',
        '/device/ota/',
        { application: { version: '1.0.0' } },
        {
          ...cross,
          'device-id': DEVICE,
          'client-id': 'web_test_client',
        },
      ),
      await request(t.httpUrl, 'GET', '/device/ota/', undefined, { ...cross, 'device-id': DEVICE }),
      await request(t.httpUrl, 'POST', '/device/ota/', {}, cross), // no Device-Id: 400
      await request(t.httpUrl, 'POST', '/device/ota/activate', {}, { ...cross, 'device-id': DEVICE }),
      await request(t.httpUrl, 'GET', '/device/ota/firmware/deskbot_1.0.0.bin', undefined, cross), // 404
      await request(t.httpUrl, 'POST', '/mcp/vision/explain', {}, { ...cross, 'device-id': DEVICE }), // 401
    ];
    expect(replies.map((reply) => reply.status)).toEqual([200, 200, 400, replies[3]!.status, 404, 401]);
    for (const reply of replies)
      expect(['*', ORIGIN], reply.text).toContain(reply.headers.get('access-control-allow-origin'));
  });
});

describe('admin routes', () => {
  it('carry no CORS headers, on a preflight or a reply', async () => {
    const admin = registered().filter((route) => route.split(' ')[1]!.startsWith('/device/admin/'));
    expect(admin.length).toBeGreaterThan(5);
    for (const route of admin) {
      const [method, path] = route.split(' ') as [string, string];
      for (const reply of [
        await preflight(path, method),
        await request(t.httpUrl, method, path, method === 'POST' ? {} : undefined, { origin: ORIGIN }),
      ]) {
        const cors = [...reply.headers.keys()].filter((name) => name.startsWith('access-control-'));
        expect(cors, `${method} ${path} (${reply.status})`).toEqual([]);
      }
    }
  });
});
