// Bad input against every HTTP route of a real bridge (:8080; DESIGN §2), /admin/* from loopback and the
// dashboard's mutations with a logged-in session: malformed JSON, non-object bodies, wrong field types, bodies
// over the 1 MiB limit, wrong or missing content types, empty bodies and broken URLs all get a 4xx in the error
// shape, never a 500 or a stack, and /health keeps answering. The table must name every route the bridge
// registers (captured from fastify itself), so a new route without a row fails here.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  describeBadBodiesAndUrls,
  expectRefusal,
  expectTableCoversRoutes,
  pathOf,
  type RouteRow,
  send,
} from '../support/bad-input.js';
import { EMBEDDED_AGENT, type RunningBridge, startTestBridge } from '../support/bridge.js';
import { expectErrorShape, healthy } from '../support/http.js';

// fastify's own route list (test/support/route-recorder.ts): a route added anywhere shows up here.
const seen = vi.hoisted(() => ({ routes: new Set<string>() }));
vi.mock('../../src/util/http-app.js', async (importOriginal) => {
  const { withRouteRecorder } = await import('../support/route-recorder.js');
  return withRouteRecorder(await importOriginal(), seen.routes);
});

/** src/bridge/server.ts: 1 MiB, so a 256 KiB persona file fits JSON-escaped. */
const BRIDGE_BODY_LIMIT = 1024 * 1024;
const UI_PASSWORD = 'bad-input-test';

let running: RunningBridge;
let dataDir: string;
/** Cookie and CSRF token of a dashboard login, so the dashboard's mutations get as far as their bodies. */
let uiGate: Record<string, string> = {};

type Row = RouteRow;

const ui = () => uiGate;
/** The /v1 pass-through judges no body: the local router does, and none is configured here (503 naming it). */
const PASSTHROUGH = {
  'a JSON array': 503,
  'a JSON string': 503,
  'a JSON number': 503,
  'wrong field types': 503,
  'content-type text/plain': 503,
} as const;
/** Logout reads no body: anything that parses is a fine logout. */
const NO_BODY = {
  'a JSON array': 200,
  'a JSON string': 200,
  'a JSON number': 200,
  'wrong field types': 200,
  'content-type text/plain': 200,
} as const;

const ROUTES: Row[] = [
  { method: 'GET', route: '/health', ok: 200 },
  { method: 'GET', route: '/metrics', ok: 200 },
  { method: 'POST', route: '/api/message', wrongTypes: { content: 5, channel: ['deskbot'] } },
  { method: 'POST', route: '/api/message/stream', wrongTypes: { content: { text: 'hi' }, channel: 1 } },
  {
    method: 'POST',
    route: '/api/voice/escalate',
    wrongTypes: { tool: 'memory_lookup', args: 'cats', session_id: 1 },
  },
  { method: 'POST', route: '/api/voice/remember', wrongTypes: { fact: 1, session_id: 's' } },
  { method: 'POST', route: '/api/voice/memory_log', wrongTypes: { user: 1, assistant: [], session_id: 3 } },
  {
    method: 'POST',
    route: '/api/voice/turn',
    wrongTypes: { device_id: 'aa', turn_id: 'one', kind: 'chat', ts: 'now' },
  },
  {
    method: 'POST',
    route: '/api/perception/event',
    wrongTypes: { name: 'face_detected', data: 'x', device_id: 5 },
    // Its own limit is 8 KiB (docs/limits.md), far under the server's: its boundary is in limits-bridge.test.ts.
    overrides: { 'exactly at the body limit': 413 },
  },
  { method: 'GET', route: '/api/perception/devices', ok: 200 },
  { method: 'GET', route: '/api/perception/stream', ok: 200, stream: true },
  { method: 'POST', route: '/api/story/stream', wrongTypes: { content: 5, session_id: {} } },
  { method: 'GET', route: '/api/calendar/today', ok: 200 },
  { method: 'GET', route: '/v1/models', ok: 503 },
  {
    method: 'POST',
    route: '/v1/chat/completions',
    wrongTypes: { model: 5, messages: 'hi' },
    overrides: PASSTHROUGH,
  },
  { method: 'POST', route: '/admin/kid-mode', wrongTypes: { enabled: 'yes' } },
  { method: 'POST', route: '/admin/smart-mode', wrongTypes: { enabled: 1, device_id: 2 } },
  { method: 'POST', route: '/admin/persona', wrongTypes: { file: 5, content: ['x'] } },
  { method: 'POST', route: '/admin/model', wrongTypes: { daemon: 'voice', model: 5 } },
  { method: 'GET', route: '/admin/safety', ok: 200 },
  { method: 'POST', route: '/admin/safety', wrongTypes: { action: 'add', tool: 5 } },
  { method: 'POST', route: '/admin/state', wrongTypes: { state: 5 } },
  { method: 'GET', route: '/ui', ok: 200 },
  { method: 'GET', route: '/ui/led-ring-mirror', ok: 200 },
  // The LED module is compiled on demand; an install without it answers 503 in the error shape.
  { method: 'GET', route: '/ui/assets/led.js', ok: [200, 503] },
  { method: 'GET', route: '/ui/assets/:name', path: '/ui/assets/common.js', ok: 200 },
  { method: 'GET', route: '/ui/api/overview', ok: 200 },
  { method: 'GET', route: '/ui/api/ring', ok: 200 },
  { method: 'GET', route: '/ui/api/session', ok: 200 },
  { method: 'POST', route: '/ui/login', wrongTypes: { password: 5 } },
  { method: 'POST', route: '/ui/logout', wrongTypes: { all: 5 }, overrides: NO_BODY },
  { method: 'POST', route: '/ui/api/kid-mode', gate: ui, wrongTypes: { enabled: 'yes' } },
  { method: 'POST', route: '/ui/api/smart-mode', gate: ui, wrongTypes: { enabled: 'no', device_id: 1 } },
  { method: 'POST', route: '/ui/api/state', gate: ui, wrongTypes: { state: ['idle'] } },
];

async function expectAlive(): Promise<void> {
  const health = await send(running.url, { method: 'GET', path: '/health' });
  expect(health.status, health.text).toBe(200);
  expect(health.json).toEqual({ ok: true });
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'deskbot-bad-input-bridge-'));
  // The embedded agent answers /health without a model; nothing here gets as far as a prompt.
  running = await startTestBridge(
    { ui: { password: UI_PASSWORD } },
    { dataDir, agentCommand: EMBEDDED_AGENT },
  );
  await healthy(running.url, 20_000);
  const login = await send(running.url, {
    method: 'POST',
    path: '/ui/login',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ password: UI_PASSWORD }),
  });
  expect(login.status, login.text).toBe(200);
  const cookie = String([login.headers['set-cookie']].flat()[0] ?? '').split(';')[0]!;
  uiGate = { cookie, 'x-csrf-token': login.json.csrf_token };
}, 60_000);
afterAll(async () => {
  await running?.bridge.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('the bridge route table', () => {
  it('names every route fastify registered, and nothing it did not', () => {
    expectTableCoversRoutes(ROUTES, seen.routes, 20);
  });

  it('the dashboard gate is open (the mutations get as far as their bodies)', async () => {
    const reply = await send(running.url, {
      method: 'POST',
      path: '/ui/api/state',
      headers: { ...uiGate, 'content-type': 'application/json' },
      body: '{"state":"flying"}',
    });
    expectErrorShape(reply, 400, 'invalid_body');
  });
});

describeBadBodiesAndUrls(ROUTES, { base: () => running.url, limit: BRIDGE_BODY_LIMIT, expectAlive });

describe.each(ROUTES.filter((row) => row.method === 'GET'))('GET $route', (row) => {
  it('answers a plain request as the table says', async () => {
    const reply = await send(running.url, {
      method: 'GET',
      path: pathOf(row),
      headers: row.gate?.() ?? {},
      ...(row.stream ? { headersOnly: true } : {}),
    });
    expectRefusal(reply, row.ok ?? 200, `GET ${row.route}`);
  });

  it('shrugs off a broken query string and an unexpected body', async () => {
    const path = `${pathOf(row)}?x=%E0%A4%A&y[z]=1&&=&%zz&device=${'d'.repeat(300)}&person=${'p'.repeat(300)}`;
    const reply = await send(running.url, {
      method: 'GET',
      path,
      headers: { ...row.gate?.(), 'content-type': 'application/json' },
      body: '{"a":',
      ...(row.stream ? { headersOnly: true } : {}),
    });
    expectRefusal(reply, (s) => s < 500 || s === 503, `GET ${path.slice(0, 80)}`);
    await expectAlive();
  });
});
