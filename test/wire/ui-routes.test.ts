// The dashboard's HTTP surface on a real bridge (SPEC "Bridge" /ui rows, "Robot state and toggles": the
// dashboard is the one non-loopback way to change smart_mode; DESIGN §2 error shape): the overview JSON,
// read-only mode, password login with session cookie + CSRF token, the static allow-list, the LED module
// served to the browser, and the mirror's ring JSON built from posted perception events.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderRing } from '../../src/robot/led.js';
import { DEAD_AGENT, type RunningBridge, TestBridges } from '../support/bridge.js';
import { eventuallyOk, expectErrorShape, parseOrUndefined, request } from '../support/http.js';

const bridges = new TestBridges('deskbot-ui-routes-');
let readOnly: RunningBridge;
let locked: RunningBridge;

beforeAll(async () => {
  [readOnly, locked] = await Promise.all([
    bridges.start({}, DEAD_AGENT),
    bridges.start({ ui: { password: 'pw', session_ttl_sec: 600 } }, DEAD_AGENT),
  ]);
}, 30_000);

afterAll(async () => {
  await bridges.closeAll();
});

interface Call {
  body?: unknown;
  headers?: Record<string, string>;
}

const call = (base: string, method: string, path: string, { body, headers }: Call = {}) =>
  request(base, method, path, body, headers);

/** A raw GET with the path exactly as written (fetch would resolve `..` before sending). */
function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const event = (base: string, device: string, name: string, data: Record<string, unknown> = {}) =>
  call(base, 'POST', '/api/perception/event', { body: { name, data, device_id: device, session_id: 's1' } });

async function login(base: string): Promise<{ cookie: string; csrf: string }> {
  const reply = await call(base, 'POST', '/ui/login', { body: { password: 'pw' } });
  expect(reply.status, reply.text).toBe(200);
  const setCookie = reply.headers.get('set-cookie') ?? '';
  return { cookie: setCookie.split(';')[0]!, csrf: reply.json.csrf_token };
}

describe('overview', () => {
  it('lists devices, recent events, turns with their latency breakdown, toggles and a down voice server', async () => {
    const base = readOnly.url;
    expect((await event(base, 'desk-1', 'state_changed', { from: 'idle', to: 'talk' })).status).toBe(200);
    expect((await event(base, 'desk-1', 'face_detected')).status).toBe(200);
    const turn = {
      device_id: 'desk-1',
      turn_id: 3,
      kind: 'chat',
      text: 'what time is it',
      from_utterance: true,
      stt_ms: 120,
      first_token_ms: 480,
      first_audio_ms: 700,
      total_ms: 2100,
      ts: Date.now() / 1000,
    };
    expect((await call(base, 'POST', '/api/voice/turn', { body: turn })).status).toBe(200);

    // The recent-events ring fills from a bus subscription, which runs just after the post.
    const overview = await eventuallyOk(async () => {
      const reply = await call(base, 'GET', '/ui/api/overview');
      return reply.json?.events?.length >= 2 ? reply : undefined;
    }, 5000);
    expect(overview.status).toBe(200);
    expect(overview.headers.get('cache-control')).toBe('no-store');
    const o = overview.json;
    expect(o).toMatchObject({
      read_only: true,
      logged_in: false,
      toggles: { kid_mode: false, smart_mode: false },
      voice: { ok: false, devices: [] },
      calendar: { ok: true },
    });
    expect(o.voice.error).toMatch(/unreachable/);
    expect(typeof o.server_now_ms).toBe('number');
    expect(o.devices[0]).toMatchObject({ device_id: 'desk-1', state: 'talk', face: { present: true } });
    expect(o.events.map((e: any) => e.name)).toEqual(['face_detected', 'state_changed']); // newest first
    expect(o.events[1]).toMatchObject({ device_id: 'desk-1', data: { from: 'idle', to: 'talk' } });
    expect(o.turns[0]).toMatchObject({
      device_id: 'desk-1',
      text: 'what time is it',
      stt_ms: 120,
      first_token_ms: 480,
      first_audio_ms: 700,
      total_ms: 2100,
    });
  });

  it('keeps only the last 50 perception events', async () => {
    const base = readOnly.url;
    for (let i = 0; i < 60; i++) await event(base, 'flood', 'sound_event', { direction: 'left', n: i });
    const events = await eventuallyOk(async () => {
      const { json } = await call(base, 'GET', '/ui/api/overview');
      return json.events[0]?.data?.n === 59 ? json.events : undefined;
    }, 5000);
    expect(events).toHaveLength(50);
    expect(events.at(-1).data.n).toBe(10);
  });

  it('carries no secret: not the password, a session id or the CSRF token', async () => {
    const { cookie, csrf } = await login(locked.url);
    const reply = await call(locked.url, 'GET', '/ui/api/overview', { headers: { cookie } });
    expect(reply.json).toMatchObject({ read_only: false, logged_in: true });
    expect(reply.text).not.toContain(csrf);
    expect(reply.text).not.toContain(cookie.split('=')[1]!);
    expect(reply.text).not.toMatch(/"pw"|password/);
  });
});

describe('read-only dashboard (no UI_PASSWORD)', () => {
  it('refuses every mutation and the login with 403 ui_read_only, and changes nothing', async () => {
    const base = readOnly.url;
    for (const [path, body] of [
      ['/ui/api/kid-mode', { enabled: true }],
      ['/ui/api/smart-mode', { enabled: false }],
      ['/ui/api/state', { state: 'sleep' }],
      ['/ui/login', { password: '' }],
    ] as const) {
      const reply = await call(base, 'POST', path, { body });
      expectErrorShape(reply, 403, 'ui_read_only');
      expect(reply.json.error.message).toContain('UI_PASSWORD');
    }
    expect(readOnly.bridge.toggles.get().kid_mode).toBe(false);
    expect((await call(base, 'GET', '/ui/api/session')).json).toEqual({ read_only: true, logged_in: false });
  });
});

describe('password login, session cookie and CSRF token', () => {
  it('a wrong password is 401 bad_password and sets no cookie', async () => {
    const reply = await call(locked.url, 'POST', '/ui/login', { body: { password: 'nope' } });
    expectErrorShape(reply, 401, 'bad_password');
    expect(reply.headers.get('set-cookie')).toBeNull();
    expectErrorShape(await call(locked.url, 'POST', '/ui/login', { body: {} }), 400, 'invalid_body');
  });

  it('the right password sets an HttpOnly SameSite=Strict cookie on /ui and returns a CSRF token', async () => {
    const reply = await call(locked.url, 'POST', '/ui/login', { body: { password: 'pw' } });
    expect(reply.status).toBe(200);
    const setCookie = reply.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/^deskbot_ui=[0-9a-f]{64}; /);
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
    expect(setCookie).toContain('Path=/ui');
    expect(setCookie).toContain('Max-Age=600');
    expect(reply.json).toMatchObject({ ok: true, csrf_token: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const cookie = setCookie.split(';')[0]!;
    const session = await call(locked.url, 'GET', '/ui/api/session', { headers: { cookie } });
    expect(session.json).toEqual({ read_only: false, logged_in: true, csrf_token: reply.json.csrf_token });
  });

  it('a mutation needs the cookie (401), the CSRF header (403) and the same origin (403)', async () => {
    const base = locked.url;
    const { cookie, csrf } = await login(base);
    const kid = (headers: Record<string, string>) =>
      call(base, 'POST', '/ui/api/kid-mode', { body: { enabled: true }, headers });

    expectErrorShape(await kid({}), 401, 'login_required');
    expectErrorShape(await kid({ 'x-csrf-token': csrf }), 401, 'login_required');
    expectErrorShape(await kid({ cookie: `deskbot_ui=${'a'.repeat(64)}`, 'x-csrf-token': csrf }), 401);
    expectErrorShape(await kid({ cookie }), 403, 'csrf_failed');
    expectErrorShape(await kid({ cookie, 'x-csrf-token': 'b'.repeat(64) }), 403, 'csrf_failed');
    expectErrorShape(
      await kid({ cookie, 'x-csrf-token': csrf, origin: 'http://evil.example' }),
      403,
      'cross_site',
    );
    expectErrorShape(
      await kid({ cookie, 'x-csrf-token': csrf, 'sec-fetch-site': 'cross-site' }),
      403,
      'cross_site',
    );
    expect(locked.bridge.toggles.get().kid_mode).toBe(false);

    const ok = await kid({ cookie, 'x-csrf-token': csrf, origin: base, 'sec-fetch-site': 'same-origin' });
    expect(ok.status, ok.text).toBe(200);
    // The voice server is down: the toggle is persisted, the pip push is reported as not done.
    expect(ok.json).toMatchObject({ ok: true, toggles: { kid_mode: true }, pushed: false });
    expect(locked.bridge.toggles.get().kid_mode).toBe(true);

    const again = await kid({ cookie, 'x-csrf-token': csrf }); // the session stays usable
    expect(again.status).toBe(200);
    const offAgain = await call(base, 'POST', '/ui/api/kid-mode', {
      body: { enabled: false },
      headers: { cookie, 'x-csrf-token': csrf },
    });
    expect(offAgain.json.toggles.kid_mode).toBe(false);
    expect(locked.bridge.toggles.get().kid_mode).toBe(false);
  });

  it('smart mode and state go through the shared controls and keep their errors', async () => {
    const base = locked.url;
    const { cookie, csrf } = await login(base);
    const headers = { cookie, 'x-csrf-token': csrf };
    expectErrorShape(
      await call(base, 'POST', '/ui/api/smart-mode', { body: { enabled: true }, headers }),
      409,
      'no_cloud_key',
    );
    expect(locked.bridge.toggles.get().smart_mode).toBe(false);
    const off = await call(base, 'POST', '/ui/api/smart-mode', { body: { enabled: false }, headers });
    expect(off.status, off.text).toBe(200);
    expectErrorShape(
      await call(base, 'POST', '/ui/api/state', { body: { state: 'sleep', device_id: 'x' }, headers }),
      503,
      'voice_unreachable',
    );
    expectErrorShape(
      await call(base, 'POST', '/ui/api/state', { body: { state: 'flying' }, headers }),
      400,
      'invalid_body',
    );
    expectErrorShape(
      await call(base, 'POST', '/ui/api/kid-mode', { body: { enabled: 'yes' }, headers }),
      400,
    );
  });

  it('logout ends the session', async () => {
    const base = locked.url;
    const { cookie, csrf } = await login(base);
    const out = await call(base, 'POST', '/ui/logout', { body: {}, headers: { cookie } });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toContain('Max-Age=0');
    const after = await call(base, 'POST', '/ui/api/kid-mode', {
      body: { enabled: true },
      headers: { cookie, 'x-csrf-token': csrf },
    });
    expectErrorShape(after, 401, 'login_required');
  });

  it('repeated wrong passwords from one address are throttled (429), even the right one meanwhile', async () => {
    const base = locked.url;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++)
      statuses.push((await call(base, 'POST', '/ui/login', { body: { password: `guess-${i}` } })).status);
    // Earlier successful logins cleared the count: five failures answer 401, the fifth also locks.
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    const right = await call(base, 'POST', '/ui/login', { body: { password: 'pw' } });
    expectErrorShape(right, 429, 'too_many_attempts');
    expect(Number(right.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('static files', () => {
  it('serves the two pages and the allow-listed assets with their types and no-cache', async () => {
    for (const [path, type, marker] of [
      ['/ui', 'text/html', 'dashboard.js'],
      ['/ui/', 'text/html', 'dashboard.js'],
      ['/ui/led-ring-mirror', 'text/html', 'mirror.js'],
      ['/ui/assets/dashboard.js', 'text/javascript', 'overview'],
      ['/ui/assets/mirror.js', 'text/javascript', 'renderRing'],
      ['/ui/assets/common.js', 'text/javascript', 'EventSource'],
      ['/ui/assets/style.css', 'text/css', '.pixel'],
    ] as const) {
      const reply = await call(readOnly.url, 'GET', path);
      expect(reply.status, path).toBe(200);
      expect(reply.headers.get('content-type'), path).toContain(type);
      expect(reply.headers.get('cache-control'), path).toBe('no-cache');
      expect(reply.headers.get('content-security-policy'), path).toContain("script-src 'self'");
      expect(reply.text, path).toContain(marker);
    }
  });

  it('refuses anything outside the allow-list, traversal included', async () => {
    for (const path of [
      '/ui/assets/../../package.json',
      '/ui/assets/..%2F..%2Fpackage.json',
      '/ui/assets/%2e%2e%2f%2e%2e%2fpackage.json',
      '/ui/assets/..%5c..%5cpackage.json',
      '/ui/assets/index.html',
      '/ui/assets/led.ts',
      '/ui/assets/',
      '/ui/../package.json',
      '/ui/index.html',
    ]) {
      const reply = await rawGet(readOnly.bridge.port, path);
      expect([400, 404], `${path}: ${reply.status}`).toContain(reply.status);
      expect(reply.body, path).not.toContain('"deskbot"');
      expect(parseOrUndefined(reply.body)?.error?.code, path).toMatch(/^[a-z_]+$/);
    }
  });

  it('serves the robot LED contract as a self-contained browser module that renders like the robot', async () => {
    const reply = await call(readOnly.url, 'GET', '/ui/assets/led.js');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toContain('text/javascript');
    expect(reply.text).toContain('export function renderRing');
    expect(reply.text).not.toMatch(/^\s*import\s/m);
    expect(reply.text).not.toContain('sourceMappingURL');
    const browserLed = await import(
      `data:text/javascript;base64,${Buffer.from(reply.text).toString('base64')}`
    );
    const input = {
      state: 'security' as const,
      stateSince: 0,
      toggles: { kid_mode: true, smart_mode: true },
      facePresent: true,
      faceIdentifiedAt: 1000,
      listening: true,
      now: 1700,
    };
    expect(browserLed.renderRing(input)).toEqual(renderRing(input));
  });
});

describe('ring JSON for the mirror', () => {
  it('follows posted state and face events; listening from chat_status; ages, not clock times', async () => {
    const base = readOnly.url;
    await event(base, 'ring-1', 'state_changed', { from: 'idle', to: 'talk' });
    await event(base, 'ring-1', 'face_detected');
    const reply = await call(base, 'GET', '/ui/api/ring?device=ring-1');
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({
      device_id: 'ring-1',
      known: true,
      state: 'talk',
      reported_state: 'talk',
      face_present: true,
      face_lost_age_ms: null,
      identified_age_ms: null,
      listening: false,
      toggles: { kid_mode: false, smart_mode: false },
    });
    expect(reply.json.state_age_ms).toBeGreaterThanOrEqual(0);
    expect(reply.json.state_age_ms).toBeLessThan(5000);

    await event(base, 'ring-1', 'chat_status', { status: 'listening' });
    await event(base, 'ring-1', 'face_lost');
    const later = (await call(base, 'GET', '/ui/api/ring')).json; // no ?device: the latest-updated one
    expect(later).toMatchObject({ device_id: 'ring-1', listening: true, face_present: false });
    expect(later.face_lost_age_ms).toBeGreaterThanOrEqual(0);

    await event(base, 'ring-1', 'face_recognized', { name: 'Ada' });
    const identified = (await call(base, 'GET', '/ui/api/ring?device=ring-1')).json;
    expect(identified.identified_age_ms).toBe(0); // the refresher keeps the pip green
  });

  it('an unknown device gets the default ring; a bad id is 400', async () => {
    const unknown = await call(readOnly.url, 'GET', '/ui/api/ring?device=nobody');
    expect(unknown.json).toMatchObject({
      device_id: 'nobody',
      known: false,
      state: 'idle',
      face_present: false,
    });
    expectErrorShape(
      await call(readOnly.url, 'GET', `/ui/api/ring?device=${'x'.repeat(200)}`),
      400,
      'invalid_query',
    );
  });
});
