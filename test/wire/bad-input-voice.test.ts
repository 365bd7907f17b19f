// Bad input against every HTTP route of a real voice server (:8003; DESIGN §2): malformed JSON, non-object
// bodies, wrong field types, bodies over the limit, wrong or missing content types, empty bodies, broken
// multipart and broken URLs all get a 4xx in the error shape, never a 500 or a stack, and the server keeps
// answering. The table must name every route the server registers (captured from fastify itself), so a new
// route without a row fails here.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { VirtualRobot } from '../../src/device/robot.js';
import {
  describeBadBodiesAndUrls,
  type Expected,
  expectRefusal,
  expectTableCoversRoutes,
  pathOf,
  type RouteRow,
  send,
} from '../support/bad-input.js';
import { expectErrorShape } from '../support/http.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

// fastify's own route list (test/support/route-recorder.ts): a route added anywhere shows up here.
const seen = vi.hoisted(() => ({ routes: new Set<string>() }));
vi.mock('../../src/util/http-app.js', async (importOriginal) => {
  const { withRouteRecorder } = await import('../support/route-recorder.js');
  return withRouteRecorder(await importOriginal(), seen.routes);
});

/** src/util/http-app.ts: the voice server keeps fastify's default of the shared factory. */
const VOICE_BODY_LIMIT = 256 * 1024;
/** src/voice/vision.ts MAX_PHOTO_BYTES. */
const MAX_PHOTO_BYTES = 2 * 1024 * 1024;
const DEVICE = 'aa:bb:cc:00:11:22';

let t: TestVoice;
let robot: VirtualRobot;
/** Device-Id and the vision bearer token of the connected robot, so vision bodies get judged. */
let visionGate: Record<string, string> = {};

type Row = RouteRow;

const device = () => ({ 'device-id': DEVICE });
const ROUTES: Row[] = [
  { method: 'GET', route: '/device/ota/', gate: device, ok: 200 },
  {
    method: 'POST',
    route: '/device/ota/',
    gate: device,
    wrongTypes: { version: 'two', flash_size: -1, application: { version: 3 }, board: 'x' },
  },
  { method: 'POST', route: '/device/ota/activate', gate: device, wrongTypes: { hmac: 42, challenge: [] } },
  {
    method: 'GET',
    route: '/device/ota/firmware/:file',
    path: '/device/ota/firmware/none_1.0.0.bin',
    ok: 404,
  },
  { method: 'GET', route: '/device/admin/devices', ok: 200 },
  { method: 'GET', route: '/device/admin/songs', ok: 200 },
  { method: 'POST', route: '/device/admin/inject-text', wrongTypes: { text: 42 } },
  { method: 'POST', route: '/device/admin/say', wrongTypes: { text: ['hi'], device_id: 7 } },
  { method: 'POST', route: '/device/admin/abort', wrongTypes: { device_id: 7 } },
  { method: 'POST', route: '/device/admin/play-asset', wrongTypes: { name: { file: 'x' } } },
  { method: 'POST', route: '/device/admin/take-photo', wrongTypes: { question: 5 } },
  { method: 'POST', route: '/device/admin/set-head-angles', wrongTypes: { yaw: 'left', pitch: true } },
  { method: 'POST', route: '/device/admin/set-state', wrongTypes: { state: 3 } },
  {
    method: 'POST',
    route: '/device/admin/set-toggle',
    // Only the bridge (the token holder) may flip a toggle; the body is judged once past that.
    gate: () => ({ authorization: `Bearer ${t.voice.admin.token}` }),
    wrongTypes: { name: 'kid_mode', enabled: 'yes' },
  },
  { method: 'POST', route: '/device/admin/capture-audio', wrongTypes: { seconds: 'five' } },
  {
    method: 'POST',
    route: '/device/admin/set-tier1slim-model',
    wrongTypes: { model: 1, url: 2, api_key: 3 },
  },
  { method: 'POST', route: '/device/admin/set-face-identified', wrongTypes: { device_id: false } },
  {
    method: 'POST',
    route: '/mcp/vision/explain',
    gate: () => visionGate,
    // The route reads multipart only: a JSON body that parses is refused by the route as not multipart (400).
    wrongTypes: { question: 5, file: 7 },
  },
  { method: 'GET', route: '/metrics', ok: 200 },
  // CORS preflights of the device-facing routes (browser clients; src/voice/cors.ts).
  { method: 'OPTIONS', route: '/device/ota/' },
  { method: 'OPTIONS', route: '/device/ota/activate' },
  { method: 'OPTIONS', route: '/device/ota/firmware/:file', path: '/device/ota/firmware/none_1.0.0.bin' },
  { method: 'OPTIONS', route: '/mcp/vision/explain' },
];

/** The voice server's liveness probe: the firmware's own boot request. */
async function expectAlive(): Promise<void> {
  const boot = await send(t.httpUrl, { method: 'GET', path: '/device/ota/', headers: device() });
  expect(boot.status, boot.text).toBe(200);
  expect(boot.json.websocket.url).toMatch(/^ws:\/\//);
}

beforeAll(async () => {
  t = await startTestVoice();
  robot = t.robot();
  await robot.start();
  const session = await eventually(() => t.voice.registry.get(robot.deviceId));
  visionGate = { 'device-id': robot.deviceId, authorization: `Bearer ${session.visionToken}` };
});
afterAll(async () => {
  await t?.close();
});

describe('the voice server route table', () => {
  it('names every route fastify registered, and nothing it did not', () => {
    expectTableCoversRoutes(ROUTES, seen.routes, 10);
  });
});

describeBadBodiesAndUrls(ROUTES, { base: () => t.httpUrl, limit: VOICE_BODY_LIMIT, expectAlive });

describe.each(ROUTES.filter((row) => row.method === 'GET'))('GET $route', (row) => {
  it('answers a plain request as the table says', async () => {
    const reply = await send(t.httpUrl, { method: 'GET', path: pathOf(row), headers: row.gate?.() ?? {} });
    expectRefusal(reply, row.ok ?? 200, `GET ${row.route}`);
  });

  it('shrugs off a broken query string and an unexpected body', async () => {
    const path = `${pathOf(row)}?x=%E0%A4%A&y[z]=1&&=&%zz`;
    const reply = await send(t.httpUrl, {
      method: 'GET',
      path,
      headers: { ...row.gate?.(), 'content-type': 'application/json' },
      body: '{"a":',
    });
    expectRefusal(reply, (s) => s < 500, `GET ${path}`);
    await expectAlive();
  });
});

describe.each(ROUTES.filter((row) => row.method === 'OPTIONS'))('OPTIONS $route', (row) => {
  it('answers a preflight with 204 and the CORS headers, whatever it carries', async () => {
    for (const headers of <Array<Record<string, string>>>[
      { origin: 'http://page.example', 'access-control-request-method': 'POST' },
      { 'access-control-request-headers': 'x'.repeat(4000) },
      {},
    ]) {
      const reply = await send(t.httpUrl, { method: 'OPTIONS', path: pathOf(row), headers });
      expect(reply.status, `OPTIONS ${row.route}`).toBe(204);
      expect(reply.headers['access-control-allow-origin']).toBe('*');
    }
    await expectAlive();
  });
});

describe('GET /device/ota/firmware/:file with an absurd name', () => {
  it('is a 414 in the error shape for a file name past the router parameter limit', async () => {
    const reply = await send(t.httpUrl, {
      method: 'GET',
      path: `/device/ota/firmware/${'a'.repeat(300)}.bin`,
    });
    expectErrorShape(reply, 414, 'url_too_long');
    await expectAlive();
  });
});

// The device's camera upload: multipart `question` + JPEG `file` (DESIGN §4), limited to one file of 2 MiB.
const BOUNDARY = 'deskbotBoundary';
const part = (name: string, value: string | Buffer, filename?: string) =>
  Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"` : ''}\r\n` +
        `${filename ? 'Content-Type: image/jpeg\r\n' : ''}\r\n`,
    ),
    Buffer.from(value),
    Buffer.from('\r\n'),
  ]);
const jpeg = (bytes: number) =>
  Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(Math.max(0, bytes - 4), 7)]);
const END = Buffer.from(`--${BOUNDARY}--\r\n`);
const multipartType = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };

const MULTIPART_CASES: Array<{
  name: string;
  headers: Record<string, string>;
  body: Buffer;
  expected: Expected;
  code?: string;
}> = [
  {
    name: 'a well-formed photo (the gate is right)',
    headers: multipartType,
    body: Buffer.concat([part('question', 'what?'), part('file', jpeg(1000), 'a.jpg'), END]),
    expected: 200,
  },
  {
    name: 'no boundary in the content type',
    headers: { 'content-type': 'multipart/form-data' },
    body: Buffer.concat([part('file', jpeg(100), 'a.jpg'), END]),
    expected: 400,
    code: 'bad_multipart',
  },
  {
    name: 'a body cut off mid-part',
    headers: multipartType,
    body: part('file', jpeg(100), 'a.jpg').subarray(0, 120),
    expected: 400,
    code: 'bad_multipart',
  },
  {
    name: 'garbage instead of parts',
    headers: multipartType,
    body: Buffer.from('not multipart at all'),
    expected: 400,
  },
  {
    name: 'no file part',
    headers: multipartType,
    body: Buffer.concat([part('question', 'what?'), END]),
    expected: 400,
    code: 'not_a_jpeg',
  },
  {
    name: 'a file that is not a JPEG',
    headers: multipartType,
    body: Buffer.concat([part('file', Buffer.from('GIF89a...'), 'a.jpg'), END]),
    expected: 400,
    code: 'not_a_jpeg',
  },
  {
    name: 'a photo one byte over 2 MiB',
    headers: multipartType,
    body: Buffer.concat([part('file', jpeg(MAX_PHOTO_BYTES + 1), 'a.jpg'), END]),
    expected: 413,
    code: 'photo_too_large',
  },
  {
    name: 'two files',
    headers: multipartType,
    body: Buffer.concat([part('file', jpeg(10), 'a.jpg'), part('file2', jpeg(10), 'b.jpg'), END]),
    expected: 413,
    code: 'too_many_parts',
  },
  {
    name: 'too many fields',
    headers: multipartType,
    body: Buffer.concat([...Array.from({ length: 20 }, (_, i) => part(`f${i}`, 'v')), END]),
    expected: 413,
    code: 'too_many_parts',
  },
];

describe('POST /mcp/vision/explain multipart', () => {
  it.each(MULTIPART_CASES)('$name', async (c) => {
    const reply = await send(t.httpUrl, {
      method: 'POST',
      path: '/mcp/vision/explain',
      headers: { ...visionGate, ...c.headers },
      body: c.body,
    });
    expectRefusal(reply, c.expected, c.name);
    if (c.code) expect(reply.json.error.code).toBe(c.code);
    await expectAlive();
  });

  it('refuses a photo without the device token before reading it (401)', async () => {
    const reply = await send(t.httpUrl, {
      method: 'POST',
      path: '/mcp/vision/explain',
      headers: { 'device-id': robot.deviceId, ...multipartType },
      body: Buffer.concat([part('file', jpeg(100), 'a.jpg'), END]),
    });
    expectErrorShape(reply, 401, 'bad_vision_token');
  });
});
