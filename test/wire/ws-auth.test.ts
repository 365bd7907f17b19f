// Device WebSocket auth (DESIGN §3: per-device HMAC token with expiry; refused upgrades get 401 before 101),
// read off the raw bytes of the HTTP exchange on a real voice server. Missing and wrong-format tokens are in
// test/wire/ota.test.ts; here: expired, other device, tampered, and the header spellings the firmware may use.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { issueDeviceToken } from '../../src/voice/device-token.js';
import { startTestVoice, type TestVoice } from '../support/voice.js';

const SECRET = 'ws-auth-test-secret';
const DEVICE = 'aa:bb:cc:00:11:22';
const OTHER = 'aa:bb:cc:00:11:33';

let t: TestVoice;
beforeAll(async () => {
  t = await startTestVoice({ auth: { enabled: true, secret: SECRET, token_ttl_sec: 3600 } });
});
afterAll(async () => {
  await t?.close();
});

interface RawReply {
  status: number;
  /** Everything the server sent before closing (or before the deadline). */
  raw: string;
}

/**
 * Sends an upgrade request by hand and reads the server's bytes: the status line is the first thing the
 * server wrote, so a 401 seen here was sent instead of (not after) a 101.
 */
function rawUpgrade(headers: Record<string, string>, path = '/device/v1/'): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = connect(t.voice.wsPort, '127.0.0.1');
    let raw = '';
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(raw)?.[1] ?? 0);
      resolve({ status, raw });
    };
    // A 101 keeps the socket open; what arrived by then is enough.
    const timer = setTimeout(finish, 1500);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      raw += chunk;
      if (raw.startsWith('HTTP/1.1 101 ') && raw.includes('\r\n\r\n')) finish();
    });
    socket.on('end', finish);
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    const lines = [
      `GET ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${t.voice.wsPort}`,
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      `Sec-WebSocket-Key: ${Buffer.from('0123456789abcdef').toString('base64')}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    ];
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

function expectRefused(reply: RawReply, code: string): void {
  expect(reply.status, reply.raw).toBe(401);
  expect(reply.raw).not.toMatch(/HTTP\/1\.1 101/);
  expect(reply.raw.toLowerCase()).not.toContain('sec-websocket-accept');
  const body = JSON.parse(reply.raw.slice(reply.raw.indexOf('\r\n\r\n') + 4));
  expect(body).toEqual({ error: { code, message: expect.any(String) } });
}

const valid = () => issueDeviceToken(SECRET, DEVICE, 3600);
const base = (authorization: string, device = DEVICE) => ({
  'Device-Id': device,
  'Client-Id': '3b7a0c8e-1f2d-4c5b-9a6e-7d8f9a0b1c2d',
  'Protocol-Version': '1',
  Authorization: authorization,
});

/** Flips one character of the signature (or body) part, keeping it valid base64url. */
function tamper(token: string, part: 0 | 1): string {
  const pieces = token.split('.');
  const text = pieces[part]!;
  const at = Math.floor(text.length / 2);
  pieces[part] = text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
  return pieces.join('.');
}

describe('device WebSocket tokens refused with 401 before any 101', () => {
  it.each([
    [
      'an expired token (issued two hours ago with a one-hour ttl)',
      () => base(`Bearer ${issueDeviceToken(SECRET, DEVICE, 3600, Date.now() - 2 * 3600_000)}`),
      'token_expired',
    ],
    [
      'a token that expired one second ago',
      () => base(`Bearer ${issueDeviceToken(SECRET, DEVICE, 1, Date.now() - 2000)}`),
      'token_expired',
    ],
    [
      "another device's token",
      () => base(`Bearer ${issueDeviceToken(SECRET, OTHER, 3600)}`),
      'token_wrong_device',
    ],
    ['a tampered signature', () => base(`Bearer ${tamper(valid(), 1)}`), 'token_bad_signature'],
    [
      'a tampered body (device and expiry)',
      () => base(`Bearer ${tamper(valid(), 0)}`),
      'token_bad_signature',
    ],
    [
      'a token re-signed with another body (expiry pushed forward)',
      () => {
        const [, signature] = valid().split('.');
        const body = Buffer.from(`${DEVICE}.${Math.floor(Date.now() / 1000) + 10 ** 8}`).toString(
          'base64url',
        );
        return base(`Bearer ${body}.${signature}`);
      },
      'token_bad_signature',
    ],
    [
      'a token signed with another secret',
      () => base(`Bearer ${issueDeviceToken('not-the-secret', DEVICE, 3600)}`),
      'token_bad_signature',
    ],
    ['a truncated signature', () => base(`Bearer ${valid().slice(0, -3)}`), 'token_bad_signature'],
    ['an empty signature', () => base(`Bearer ${valid().split('.')[0]}.`), 'token_malformed'],
    ['three parts', () => base(`Bearer ${valid()}.x`), 'token_malformed'],
    ['Bearer with no token', () => base('Bearer'), 'missing_token'],
    ['another scheme', () => base(`Basic ${valid()}`), 'token_malformed'],
    ['an empty Authorization', () => base(''), 'missing_token'],
  ])('%s', async (_name, headers, code) => {
    expectRefused(await rawUpgrade(headers()), code);
  });

  it('takes a valid token for one device only, whatever Device-Id spelling', async () => {
    const token = valid();
    expectRefused(await rawUpgrade(base(`Bearer ${token}`, OTHER)), 'token_wrong_device');
    expectRefused(await rawUpgrade(base(`Bearer ${token}`, OTHER.toUpperCase())), 'token_wrong_device');
  });

  it('leaves no session behind for a refused upgrade', async () => {
    expect(t.voice.registry.list()).toHaveLength(0);
  });
});

describe('header spellings the firmware may send', () => {
  // Node lower-cases header names; the raw request proves a lower-case name on the wire works too.
  it.each([
    ['Authorization: Bearer <token>', { Authorization: 'Bearer {t}' }, ''],
    ['authorization: Bearer <token>', { authorization: 'Bearer {t}' }, ''],
    ['AUTHORIZATION: Bearer <token>', { AUTHORIZATION: 'Bearer {t}' }, ''],
    ['scheme bearer', { authorization: 'bearer {t}' }, ''],
    ['scheme BEARER', { authorization: 'BEARER {t}' }, ''],
    ['two spaces after the scheme', { Authorization: 'Bearer  {t}' }, ''],
    ['a tab after the scheme', { Authorization: 'Bearer\t{t}' }, ''],
    ['trailing whitespace', { Authorization: 'Bearer {t}  ' }, ''],
    ['the bare token', { Authorization: '{t}' }, ''],
    ['the query-string fallback (browser clients)', {}, '?token={t}'],
  ])('%s upgrades (101)', async (_name, auth: Record<string, string>, query) => {
    const token = valid();
    const headers = Object.fromEntries(Object.entries(auth).map(([k, v]) => [k, v.replace('{t}', token)]));
    const reply = await rawUpgrade(
      { 'device-id': DEVICE.toUpperCase(), 'protocol-version': '1', ...headers },
      `/device/v1/${query.replace('{t}', token)}`,
    );
    expect(reply.status, reply.raw).toBe(101);
    expect(reply.raw.toLowerCase()).toContain('sec-websocket-accept');
  });

  it('a wrong token in a lower-case header is refused just the same', async () => {
    expectRefused(
      await rawUpgrade({ 'device-id': DEVICE, authorization: `bearer ${tamper(valid(), 1)}` }),
      'token_bad_signature',
    );
  });
});

describe('a valid token', () => {
  it('upgrades and gets the server hello', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${t.voice.wsPort}/device/v1/`, {
      headers: base(`Bearer ${valid()}`),
      perMessageDeflate: false,
    });
    let upgradeStatus = 0;
    socket.on('upgrade', (response) => {
      upgradeStatus = response.statusCode ?? 0;
    });
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('open', () => resolve());
        socket.once('error', reject);
        socket.once('unexpected-response', (_req, res) =>
          reject(new Error(`refused: HTTP ${res.statusCode}`)),
        );
      });
      expect(upgradeStatus).toBe(101);
      const hello = new Promise<Record<string, unknown>>((resolve) => {
        socket.on('message', (data, isBinary) => {
          if (isBinary) return;
          const frame = JSON.parse(String(data)) as Record<string, unknown>;
          if (frame.type === 'hello') resolve(frame);
        });
      });
      socket.send(
        JSON.stringify({
          type: 'hello',
          version: 1,
          features: { mcp: false },
          transport: 'websocket',
          audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
        }),
      );
      const frame = await hello;
      expect(frame).toMatchObject({ type: 'hello', transport: 'websocket', session_id: expect.any(String) });
      expect(t.voice.registry.get(DEVICE)).toBeDefined();
    } finally {
      socket.close();
    }
  });
});

describe('malformed HTTP on the device port', () => {
  it('answers 400 in the error shape (not a bare 400) and the listener keeps serving', async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(t.voice.wsPort, '127.0.0.1', () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString('latin1');
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      socket.setTimeout(5000, () => socket.destroy(new Error('no answer')));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(body.error.code).toBe('bad_request');
    const plain = await fetch(`http://127.0.0.1:${t.voice.wsPort}/device/v1/`);
    expect(plain.status).toBe(426);
  });
});
