// Voice admin protection (DESIGN §3: VOICE_ADMIN_TOKEN Bearer and VOICE_ADMIN_ALLOW CIDRs, both off by default)
// against a real voice server over HTTP on 127.0.0.1. The peer-address rule from a real non-loopback peer is in
// test/e2e/admin-netns.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { startVoiceServer } from '../../src/voice/server.js';
import { expectErrorShape, request } from '../support/http.js';
import { startTestVoice, type TestVoice } from '../support/voice.js';

let t: TestVoice | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const TOKEN = 'correct-horse-battery-staple';

const call = (
  base: string,
  path: string,
  {
    method = 'GET',
    headers,
    body,
  }: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
) => request(base, method, path, body, headers);

/** Admin requests that are routed (devices, a POST with a body) or not (xyz), plus router-equivalent spellings. */
const ADMIN_PATHS: Array<[string, string]> = [
  ['GET', '/device/admin/devices'],
  ['GET', '/device/admin/songs'],
  ['POST', '/device/admin/say'],
  ['POST', '/device/admin/set-toggle'],
  ['GET', '/device/admin/xyz'],
  ['DELETE', '/device/admin'],
  ['GET', '/device/%61dmin/devices'],
  ['GET', '//device//admin/devices'],
  ['GET', '/device/admin/devices?device_id=x'],
];

describe('voice admin routes without VOICE_ADMIN_TOKEN / VOICE_ADMIN_ALLOW', () => {
  it('answer anyone (SPEC default: network ACLs)', async () => {
    t = await startTestVoice();
    const devices = await call(t.httpUrl, '/device/admin/devices');
    expect(devices.status).toBe(200);
    expect(devices.json).toEqual({ devices: [] });
    expectErrorShape(
      await call(t.httpUrl, '/device/admin/say', { method: 'POST', body: { text: 'hi' } }),
      503,
      'no_device',
    );
    expectErrorShape(await call(t.httpUrl, '/device/admin/xyz'), 404, 'not_found');
    // A token sent anyway changes nothing.
    const withToken = await call(t.httpUrl, '/device/admin/devices', {
      headers: { authorization: 'Bearer x' },
    });
    expect(withToken.status).toBe(200);
  });
});

describe('VOICE_ADMIN_TOKEN', () => {
  it('refuses a missing or wrong Bearer token with 401 and WWW-Authenticate, on every admin path', async () => {
    t = await startTestVoice({ voice_admin: { token: TOKEN } });
    const wrong: Array<Record<string, string>> = [
      {},
      { authorization: '' },
      { authorization: 'Bearer' },
      { authorization: 'Bearer wrong' },
      { authorization: `Bearer ${TOKEN}x` },
      { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
      { authorization: `Bearer ${TOKEN.toUpperCase()}` },
      { authorization: `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}` },
      { authorization: TOKEN },
      { 'x-api-key': TOKEN },
    ];
    for (const [method, path] of ADMIN_PATHS) {
      for (const headers of wrong) {
        const reply = await call(t.httpUrl, path, {
          method,
          headers,
          ...(method === 'POST' ? { body: { text: 'hi', name: 'kid_mode', enabled: true } } : {}),
        });
        expectErrorShape(reply, 401, 'unauthorized');
        expect(reply.headers.get('www-authenticate'), `${method} ${path}`).toMatch(/^Bearer\b/);
        expect(reply.text).not.toContain(TOKEN);
      }
    }
    // Nothing behind the wall ran: the toggle is unchanged.
    expect(t.voice.toggles.kid_mode).toBe(false);
  });

  it('lets the right token through to the usual answers (scheme in any case)', async () => {
    t = await startTestVoice({ voice_admin: { token: TOKEN } });
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const devices = await call(t.httpUrl, '/device/admin/devices', {
        headers: { authorization: `${scheme} ${TOKEN}` },
      });
      expect(devices.status, devices.text).toBe(200);
      expect(devices.json).toEqual({ devices: [] });
    }
    const auth = { authorization: `Bearer ${TOKEN}` };
    expectErrorShape(
      await call(t.httpUrl, '/device/admin/say', { method: 'POST', headers: auth, body: { text: 'hi' } }),
      503,
      'no_device',
    );
    expectErrorShape(
      await call(t.httpUrl, '/device/admin/say', { method: 'POST', headers: auth, body: { text: 1 } }),
      400,
      'invalid_body',
    );
    const toggle = await call(t.httpUrl, '/device/admin/set-toggle', {
      method: 'POST',
      headers: auth,
      body: { name: 'kid_mode', enabled: true },
    });
    expect(toggle.status, toggle.text).toBe(200);
    expect(t.voice.toggles.kid_mode).toBe(true);
    // Behind the wall, unknown paths are the ordinary 404.
    expectErrorShape(await call(t.httpUrl, '/device/admin/xyz', { headers: auth }), 404, 'not_found');
  });

  it('leaves the device-facing routes alone (OTA, metrics)', async () => {
    t = await startTestVoice({ voice_admin: { token: TOKEN, allow: ['10.0.0.0/8'] } });
    const ota = await call(t.httpUrl, '/device/ota/', { headers: { 'device-id': 'aa:bb:cc:dd:ee:ff' } });
    expect(ota.status, ota.text).toBe(200);
    expect((await call(t.httpUrl, '/metrics')).status).toBe(200);
    expectErrorShape(await call(t.httpUrl, '/device/administrator'), 404, 'not_found');
  });
});

describe('VOICE_ADMIN_ALLOW', () => {
  it('refuses a peer outside every CIDR with 403, even with the right token and forwarding headers', async () => {
    t = await startTestVoice({ voice_admin: { allow: ['10.0.0.0/8', '::2/128'], token: TOKEN } });
    const spoofed = {
      authorization: `Bearer ${TOKEN}`,
      'x-forwarded-for': '10.1.2.3',
      'x-real-ip': '10.1.2.3',
      forwarded: 'for=10.1.2.3',
    };
    for (const [method, path] of ADMIN_PATHS) {
      const reply = await call(t.httpUrl, path, {
        method,
        headers: spoofed,
        ...(method === 'POST' ? { body: { name: 'kid_mode', enabled: true } } : {}),
      });
      expectErrorShape(reply, 403, 'forbidden');
      expect(reply.headers.get('www-authenticate')).toBeNull();
    }
    expect(t.voice.toggles.kid_mode).toBe(false);
  });

  it('lets a peer inside a CIDR through; with a token as well, both must hold', async () => {
    t = await startTestVoice({ voice_admin: { allow: ['127.0.0.0/8'] } });
    expect((await call(t.httpUrl, '/device/admin/devices')).status).toBe(200);
    expectErrorShape(await call(t.httpUrl, '/device/admin/xyz'), 404, 'not_found');
    await t.close();

    t = await startTestVoice({ voice_admin: { allow: ['192.168.0.0/16', '127.0.0.1/32'], token: TOKEN } });
    expectErrorShape(await call(t.httpUrl, '/device/admin/devices'), 401, 'unauthorized');
    const ok = await call(t.httpUrl, '/device/admin/devices', {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(ok.status).toBe(200);
  });

  it('matches an IPv4 peer on a dual-stack listener (::ffff:127.0.0.1)', async (ctx) => {
    try {
      t = await startTestVoice({ server: { bind_host: '::' }, voice_admin: { allow: ['127.0.0.0/8'] } });
    } catch (error) {
      // No IPv6 in this environment: there is no dual-stack listener to test.
      ctx.skip(`cannot bind :: here (${(error as Error).message})`);
      return;
    }
    expect((await call(t.httpUrl, '/device/admin/devices')).status).toBe(200);
  });
});

describe('refusals are logged', () => {
  it('at warn, with peer and path, never the token', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const dataDir = mkdtempSync(join(tmpdir(), 'deskbot-admin-auth-'));
    const voice = await startVoiceServer(
      parseConfig({
        data_dir: dataDir,
        bridge: { url: 'http://127.0.0.1:9' },
        server: { bind_host: '127.0.0.1', ws_port: 0, http_port: 0 },
        voice_admin: { token: TOKEN },
      }),
      pino({ level: 'warn' }, sink),
    );
    try {
      const base = `http://127.0.0.1:${voice.httpPort}`;
      await call(base, `/device/admin/devices?token=${TOKEN}`, {
        headers: { authorization: `Bearer ${TOKEN}-not` },
      });
      const refusals = lines
        .map((line) => JSON.parse(line))
        .filter((e) => e.msg === 'voice admin request refused');
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toMatchObject({
        level: 40,
        peer: '127.0.0.1',
        path: '/device/admin/devices',
        reason: 'wrong_token',
      });
      expect(lines.join('\n')).not.toContain(TOKEN);
    } finally {
      await voice.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('the bridge calling a token-protected voice server', () => {
  it('sends VOICE_ADMIN_TOKEN, so its admin calls (set-toggle via /admin/kid-mode) get through', async () => {
    t = await startTestVoice({ voice_admin: { token: TOKEN } });
    const { startTestBridge, DEAD_AGENT } = await import('../support/bridge.js');
    const dataDir = mkdtempSync(join(tmpdir(), 'deskbot-auth-bridge-'));
    const withToken = await startTestBridge(
      { bridge: { voice_url: t.httpUrl }, voice_admin: { token: TOKEN } },
      { dataDir, agentCommand: DEAD_AGENT },
    );
    const withoutToken = await startTestBridge(
      { bridge: { voice_url: t.httpUrl } },
      { dataDir: mkdtempSync(join(tmpdir(), 'deskbot-auth-bridge-')), agentCommand: DEAD_AGENT },
    );
    try {
      // No robot is connected: a call that got past the guard is a 503 `no_device`, one that did not is 401.
      const through = await call(withToken.url, '/admin/kid-mode', {
        method: 'POST',
        body: { enabled: true },
      });
      expect(through.status).toBe(200);
      expect(through.json.push_error ?? '').not.toMatch(/401|unauthori[sz]ed|token/i);
      const refused = await call(withoutToken.url, '/admin/kid-mode', {
        method: 'POST',
        body: { enabled: true },
      });
      expect(refused.status).toBe(200); // the toggle is persisted either way; only the pip push fails
      expect(refused.json.pushed).toBe(false);
      expect(refused.json.push_error).toMatch(/bearer|token|unauthori[sz]ed/i);
    } finally {
      await withToken.bridge.close();
      await withoutToken.bridge.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 30_000);
});
