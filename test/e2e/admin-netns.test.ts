// The admin address rules from a REAL non-loopback peer (SPEC "Authentication"; DESIGN §3): a network namespace
// on a veth pair talks to a real bridge and a real voice server bound to 0.0.0.0. Bridge /admin/* must answer
// that peer 403 whatever headers it sends; the voice server's VOICE_ADMIN_ALLOW must refuse it too. Non-admin
// routes answering 200 from the same peer prove the 403s are the rule, not a broken network.
// Needs root for `ip netns`; without it this file fails (by design: it must not silently skip).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEAD_AGENT, type RunningBridge, startTestBridge } from '../support/bridge.js';
import { expectErrorShape, request } from '../support/http.js';
import { createNetns, type Netns } from '../support/netns.js';
import { startTestVoice, type TestVoice } from '../support/voice.js';

let ns: Netns | undefined;
let bridge: RunningBridge | undefined;
let voice: TestVoice | undefined;
let dataDir: string | undefined;

beforeAll(async () => {
  ns = await createNetns('admin');
  dataDir = mkdtempSync(join(tmpdir(), 'deskbot-admin-netns-'));
  // The agent runtime is irrelevant to the admin rule; a dead one keeps the test fast and offline.
  bridge = await startTestBridge({}, { dataDir, agentCommand: DEAD_AGENT, bindHost: '0.0.0.0' });
  voice = await startTestVoice({ server: { bind_host: '0.0.0.0' }, voice_admin: { allow: ['127.0.0.0/8'] } });
}, 60_000);

afterAll(async () => {
  try {
    await Promise.allSettled([bridge?.bridge.close(), voice?.close()]);
  } finally {
    ns?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
});

const remoteBridge = (path: string) => `http://${ns!.hostAddress}:${bridge!.bridge.port}${path}`;
const remoteVoice = (path: string) => `http://${ns!.hostAddress}:${voice!.voice.httpPort}${path}`;
const kidMode = () => bridge!.bridge.toggles.get().kid_mode;

/** Headers a proxy (or an attacker pretending to be one) would send to claim a loopback origin. */
const SPOOFS: Array<[string, Record<string, string>]> = [
  ['no extra header', {}],
  ['X-Forwarded-For: 127.0.0.1', { 'X-Forwarded-For': '127.0.0.1' }],
  ['X-Real-IP: 127.0.0.1', { 'X-Real-IP': '127.0.0.1' }],
  ['Forwarded: for=127.0.0.1', { Forwarded: 'for=127.0.0.1' }],
  ['Host: localhost', { Host: 'localhost' }],
  [
    'all of them, IPv6 too',
    {
      'X-Forwarded-For': '127.0.0.1, ::1',
      'X-Real-IP': '::1',
      Forwarded: 'for="[::1]";proto=http',
      'X-Client-IP': '127.0.0.1',
      Host: 'localhost',
    },
  ],
];

describe('the namespace is a real peer', () => {
  it('reaches the bridge and the voice server on non-admin routes', async () => {
    const devices = await ns!.curl(remoteBridge('/api/perception/devices'));
    expect(devices.status, devices.text).toBe(200);
    expect(devices.json).toEqual({ devices: expect.any(Array) });
    const ota = await ns!.curl(remoteVoice('/device/ota/'), {
      headers: { 'Device-Id': 'aa:bb:cc:dd:ee:01' },
    });
    expect(ota.status, ota.text).toBe(200);
    expect(ota.json.websocket.url).toContain(ns!.hostAddress);
  });
});

describe('bridge /admin/* from a non-loopback peer', () => {
  it.each(SPOOFS)('POST /admin/kid-mode with %s → 403, toggle unchanged', async (_name, headers) => {
    const reply = await ns!.curl(remoteBridge('/admin/kid-mode'), { headers, body: '{"enabled":true}' });
    expectErrorShape(reply, 403, 'forbidden');
    expect(kidMode()).toBe(false);
  });

  it('refuses every admin route, and unknown admin paths, with 403 and changes nothing', async () => {
    const soul = readFileSync(join(bridge!.workspace, 'SOUL.md'), 'utf8');
    const safetyBefore = (await request(bridge!.url, 'GET', '/admin/safety')).json;
    const routes: Array<[string, string, string?]> = [
      ['POST', '/admin/kid-mode', '{"enabled":true}'],
      ['POST', '/admin/smart-mode', '{"enabled":true}'],
      ['POST', '/admin/persona', '{"file":"SOUL.md","content":"owned"}'],
      ['POST', '/admin/model', '{"daemon":"agent","model":"evil/model"}'],
      ['GET', '/admin/safety'],
      ['POST', '/admin/safety', '{"action":"add","tool":"shell"}'],
      ['POST', '/admin/state', '{"state":"sleep"}'],
      ['GET', '/admin/x'],
      ['POST', '/admin/x', '{}'],
      ['GET', '/admin'],
      ['DELETE', '/admin/kid-mode'],
      ['GET', '/admin/kid-mode?enabled=true'],
    ];
    for (const [method, path, body] of routes) {
      const reply = await ns!.curl(remoteBridge(path), { method, ...(body === undefined ? {} : { body }) });
      expectErrorShape(reply, 403, 'forbidden');
    }
    expect(bridge!.bridge.toggles.get()).toMatchObject({ kid_mode: false, smart_mode: false });
    expect(readFileSync(join(bridge!.workspace, 'SOUL.md'), 'utf8')).toBe(soul);
    expect((await request(bridge!.url, 'GET', '/admin/safety')).json).toEqual(safetyBefore);
  });

  // The router percent-decodes and folds duplicate slashes, so these reach the kid-mode handler; the loopback
  // rule must see them as /admin paths too (src/bridge/routes-admin.ts matches the raw request.url).
  it.each([['//admin/kid-mode'], ['/%61dmin/kid-mode'], ['/admin//kid-mode'], ['/admin/kid%2Dmode']])(
    'POST %s (same handler, other spelling) → refused, toggle unchanged',
    async (path) => {
      // Each case starts from off, so one hole does not hide (or fake) another.
      expect((await request(bridge!.url, 'POST', '/admin/kid-mode', { enabled: false })).status).toBe(200);
      const reply = await ns!.curl(remoteBridge(path), { body: '{"enabled":true}' });
      expect(kidMode(), `${path} changed kid_mode from outside: ${reply.status} ${reply.text}`).toBe(false);
      expectErrorShape(reply, 403, 'forbidden');
    },
  );

  it('the same POST from loopback → 200 and the toggle flips', async () => {
    const on = await request(bridge!.url, 'POST', '/admin/kid-mode', { enabled: true });
    expect(on.status, on.text).toBe(200);
    expect(kidMode()).toBe(true);
    const off = await request(bridge!.url, 'POST', '/admin/kid-mode', { enabled: false });
    expect(off.status, off.text).toBe(200);
    expect(kidMode()).toBe(false);
  });
});

describe('voice /device/admin/* with VOICE_ADMIN_ALLOW=127.0.0.0/8', () => {
  it.each(SPOOFS)('the namespace peer gets 403 with %s', async (_name, headers) => {
    for (const path of ['/device/admin/devices', '/device/admin/xyz', '//device/admin/devices']) {
      expectErrorShape(await ns!.curl(remoteVoice(path), { headers }), 403, 'forbidden');
    }
    const toggle = await ns!.curl(remoteVoice('/device/admin/set-toggle'), {
      headers,
      body: '{"name":"kid_mode","enabled":true}',
    });
    expectErrorShape(toggle, 403, 'forbidden');
    expect(voice!.voice.toggles.kid_mode).toBe(false);
  });

  it('loopback is inside the list: admin answers as usual', async () => {
    const devices = await request(voice!.httpUrl, 'GET', '/device/admin/devices');
    expect(devices.status, devices.text).toBe(200);
    expect(devices.json).toEqual({ devices: [] });
    expectErrorShape(await request(voice!.httpUrl, 'GET', '/device/admin/xyz'), 404, 'not_found');
  });
});

// Nothing configured (the default): the voice server made its own token in DATA_DIR. Admin routes are locked to
// this machine; another host needs the token; the toggles pass only with the token the bridge holds.
describe('voice /device/admin/* with nothing configured (locked by default)', () => {
  let open: TestVoice | undefined;
  let sameHostBridge: RunningBridge | undefined;
  const ADMIN_ROUTES: Array<[string, string, string?]> = [
    ['GET', '/device/admin/devices'],
    ['GET', '/device/admin/songs'],
    ['POST', '/device/admin/say', '{"text":"hi"}'],
    ['POST', '/device/admin/inject-text', '{"text":"hi"}'],
    ['POST', '/device/admin/abort', '{}'],
    ['POST', '/device/admin/set-state', '{"state":"security"}'],
    ['POST', '/device/admin/set-toggle', '{"name":"kid_mode","enabled":false}'],
    [
      'POST',
      '/device/admin/set-tier1slim-model',
      '{"model":"m","url":"http://203.0.113.1/v1","api_key":"k"}',
    ],
    ['POST', '/device/admin/capture-audio', '{"seconds":1}'],
    ['POST', '/device/admin/take-photo', '{}'],
    ['POST', '/device/admin/set-head-angles', '{"yaw":10}'],
    ['POST', '/device/admin/play-asset', '{"name":"purr"}'],
    ['POST', '/device/admin/set-face-identified', '{}'],
    ['GET', '/device/admin/xyz'],
    ['GET', '//device//%61dmin/devices'],
  ];
  const remote = (path: string) => `http://${ns!.hostAddress}:${open!.voice.httpPort}${path}`;

  beforeAll(async () => {
    open = await startTestVoice({ server: { bind_host: '0.0.0.0' } });
    // A one-host install: the bridge shares DATA_DIR with the voice server and reads its token from there.
    sameHostBridge = await startTestBridge(
      { bridge: { voice_url: open.httpUrl } },
      { dataDir: open.dataDir, agentCommand: DEAD_AGENT },
    );
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled([sameHostBridge?.bridge.close(), open?.close()]);
  });

  it.each(ADMIN_ROUTES)(
    '%s %s from another host → 401 without the token, past the guard with it',
    async (method, path, body) => {
      const refused = await ns!.curl(remote(path), { method, ...(body ? { body } : {}) });
      expectErrorShape(refused, 401, 'unauthorized');
      const allowed = await ns!.curl(remote(path), {
        method,
        headers: { Authorization: `Bearer ${open!.voice.admin.token}` },
        ...(body ? { body } : {}),
      });
      expect(allowed.status, allowed.text).not.toBe(401);
      expect(allowed.status, allowed.text).not.toBe(403);
    },
  );

  it('the model URL stays ours: set-tier1slim-model from another host changes nothing', async () => {
    const before = (await request(open!.httpUrl, 'GET', '/device/admin/devices')).status;
    expect(before).toBe(200);
    const reply = await ns!.curl(remote('/device/admin/set-tier1slim-model'), {
      body: '{"model":"evil","url":"http://203.0.113.66/v1","api_key":"k"}',
    });
    expectErrorShape(reply, 401, 'unauthorized');
    expect(JSON.stringify(open!.voice.providers.llm)).not.toContain('203.0.113.66');
  });

  it('set-toggle (kid_mode, smart_mode) is refused from loopback too unless it comes from the bridge', async () => {
    for (const name of ['kid_mode', 'smart_mode']) {
      const direct = await request(open!.httpUrl, 'POST', '/device/admin/set-toggle', {
        name,
        enabled: true,
      });
      expectErrorShape(direct, 401, 'unauthorized');
    }
    expect(open!.voice.toggles.kid_mode).toBe(false);
    // Other admin routes still answer loopback callers without a token.
    expect((await request(open!.httpUrl, 'GET', '/device/admin/devices')).status).toBe(200);
    // Through the bridge (which read the token from the shared DATA_DIR) the flip gets through.
    const viaBridge = await request(sameHostBridge!.url, 'POST', '/admin/kid-mode', { enabled: true });
    expect(viaBridge.status, viaBridge.text).toBe(200);
    expect(viaBridge.json.push_error ?? '').not.toMatch(/401|unauthori[sz]ed|token/i);
    expect(open!.voice.toggles.kid_mode).toBe(true);
  });
});
