// decideUpgrade: the WebSocket upgrade decision from URL and headers alone (path, Device-Id,
// Protocol-Version, query-string fallback, token check), before any 101 is sent.
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { issueDeviceToken } from '../../src/voice/device-token.js';
import { decideUpgrade } from '../../src/voice/ws-listener.js';

const MAC = 'aa:bb:cc:dd:ee:ff';
const NOW = 1_700_000_000_000;

function request(url: string | undefined, headers: Record<string, string> = {}, remoteAddress?: string) {
  // Node lowercases header names on IncomingMessage; values keep whatever case the device sent.
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { url, headers: lower, socket: { remoteAddress } } as unknown as IncomingMessage;
}

const device = (extra: Record<string, string> = {}) => ({ 'Device-Id': MAC, 'Client-Id': 'c-1', ...extra });

describe('path', () => {
  it.each(['/device/v1/', '/device/v1', '/device/v1/?x=1', '/device/v1?x=1'])('%s is accepted', (url) => {
    expect(decideUpgrade(request(url, device()), undefined, NOW)).toMatchObject({ ok: true });
  });

  it.each([
    undefined,
    '/',
    '/device/',
    '/device/v2/',
    '/device/v1/x',
    '/Device/v1/',
    '/device/v1//',
    '/xiaozhi/v1/',
  ])('%s → 404', (url) => {
    expect(decideUpgrade(request(url, device()), undefined, NOW)).toMatchObject({
      ok: false,
      status: 404,
      code: 'not_found',
    });
  });
});

describe('headers', () => {
  it('returns the connection info', () => {
    const decision = decideUpgrade(
      request('/device/v1/', device({ 'Protocol-Version': '3' }), '192.168.1.20'),
      undefined,
      NOW,
    );
    expect(decision).toEqual({
      ok: true,
      info: { deviceId: MAC, clientId: 'c-1', binaryVersion: 3, remoteAddress: '192.168.1.20' },
    });
  });

  it.each([
    ['lowercase MAC', MAC],
    ['uppercase MAC', 'AA:BB:CC:DD:EE:FF'],
    ['mixed case MAC', 'Aa:bB:cc:DD:ee:Ff'],
  ])('%s is normalised to lowercase', (_name, id) => {
    const decision = decideUpgrade(request('/device/v1/', { 'DEVICE-ID': id }), undefined, NOW);
    expect(decision).toMatchObject({ ok: true, info: { deviceId: MAC, clientId: '', binaryVersion: 1 } });
  });

  it('defaults: Protocol-Version 1, empty Client-Id and remote address', () => {
    expect(decideUpgrade(request('/device/v1/', { 'device-id': MAC }), undefined, NOW)).toEqual({
      ok: true,
      info: { deviceId: MAC, clientId: '', binaryVersion: 1, remoteAddress: '' },
    });
  });

  it.each([
    ['1', 1],
    ['2', 2],
    ['3', 3],
  ])('Protocol-Version %s', (value, version) => {
    const decision = decideUpgrade(
      request('/device/v1/', device({ 'Protocol-Version': value })),
      undefined,
      NOW,
    );
    expect(decision).toMatchObject({ ok: true, info: { binaryVersion: version } });
  });

  it.each(['4', '0', 'abc', '1.5', '-1'])('Protocol-Version %s → 400', (value) => {
    expect(
      decideUpgrade(request('/device/v1/', device({ 'Protocol-Version': value })), undefined, NOW),
    ).toMatchObject({
      ok: false,
      status: 400,
      code: 'unsupported_protocol_version',
    });
  });

  it.each([
    ['missing', {}, 'missing_device_id'],
    ['empty', { 'Device-Id': '' }, 'missing_device_id'],
    ['not a MAC', { 'Device-Id': 'robot-1' }, 'bad_device_id'],
    ['dash MAC', { 'Device-Id': 'aa-bb-cc-dd-ee-ff' }, 'bad_device_id'],
    ['short MAC', { 'Device-Id': 'aa:bb:cc:dd:ee' }, 'bad_device_id'],
  ])('Device-Id %s → 400', (_name, headers, code) => {
    expect(decideUpgrade(request('/device/v1/', headers), undefined, NOW)).toMatchObject({
      ok: false,
      status: 400,
      code,
    });
  });
});

describe('query-string fallback (browser clients cannot set headers)', () => {
  it.each([
    '/device/v1/?device-id=aa:bb:cc:dd:ee:ff&client-id=web-1&protocol-version=2',
    '/device/v1/?device_id=AA%3ABB%3ACC%3ADD%3AEE%3AFF&client_id=web-1&protocol_version=2',
  ])('%s', (url) => {
    expect(decideUpgrade(request(url), undefined, NOW)).toEqual({
      ok: true,
      info: { deviceId: MAC, clientId: 'web-1', binaryVersion: 2, remoteAddress: '' },
    });
  });

  it('headers win over the query string', () => {
    const url = '/device/v1/?device-id=11:22:33:44:55:66&protocol-version=3';
    const decision = decideUpgrade(
      request(url, { 'Device-Id': MAC, 'Protocol-Version': '2' }),
      undefined,
      NOW,
    );
    expect(decision).toMatchObject({ ok: true, info: { deviceId: MAC, binaryVersion: 2 } });
  });

  it('a bad query value is refused like a bad header', () => {
    expect(decideUpgrade(request('/device/v1/?device-id=nope'), undefined, NOW)).toMatchObject({
      status: 400,
    });
    expect(
      decideUpgrade(request(`/device/v1/?device-id=${MAC}&protocol-version=4`), undefined, NOW),
    ).toMatchObject({
      status: 400,
      code: 'unsupported_protocol_version',
    });
  });
});

describe('token check when an auth secret is set', () => {
  const secret = 'upgrade-secret';
  const token = issueDeviceToken(secret, MAC, 60, NOW);
  const withAuth = (authorization?: string, url = '/device/v1/') =>
    request(url, authorization === undefined ? device() : device({ Authorization: authorization }));

  it.each<[string, IncomingMessage, number, string]>([
    ['no Authorization', withAuth(), 0, 'missing_token'],
    ['empty Bearer', withAuth('Bearer '), 0, 'missing_token'],
    ['garbage token', withAuth('Bearer garbage'), 0, 'token_malformed'],
    [
      'token for another device',
      withAuth(`Bearer ${issueDeviceToken(secret, '11:22:33:44:55:66', 60, NOW)}`),
      0,
      'token_wrong_device',
    ],
    [
      'token from another secret',
      withAuth(`Bearer ${issueDeviceToken('other', MAC, 60, NOW)}`),
      0,
      'token_bad_signature',
    ],
    ['expired token', withAuth(`Bearer ${token}`), 60_000, 'token_expired'],
  ])('%s → 401', (_name, req, laterMs, code) => {
    expect(decideUpgrade(req, secret, NOW + laterMs)).toMatchObject({ ok: false, status: 401, code });
  });

  it.each<[string, IncomingMessage]>([
    ['Bearer header', withAuth(`Bearer ${token}`)],
    ['lowercase scheme', withAuth(`bearer ${token}`)],
    ['token in the query string', withAuth(undefined, `/device/v1/?token=${token}`)],
    [
      'uppercase Device-Id with a token for the lowercase MAC',
      request('/device/v1/', { 'Device-Id': MAC.toUpperCase(), Authorization: `Bearer ${token}` }),
    ],
  ])('valid token via %s → ok', (_name, req) => {
    expect(decideUpgrade(req, secret, NOW + 59_000)).toMatchObject({ ok: true, info: { deviceId: MAC } });
  });

  it('without a secret the Authorization header is not checked', () => {
    expect(decideUpgrade(withAuth('Bearer garbage'), undefined, NOW)).toMatchObject({ ok: true });
    expect(decideUpgrade(withAuth('Bearer garbage'), '', NOW)).toMatchObject({ ok: true });
  });

  it('path and Device-Id are checked before the token', () => {
    expect(decideUpgrade(request('/other', {}), secret, NOW)).toMatchObject({ status: 404 });
    expect(decideUpgrade(request('/device/v1/', {}), secret, NOW)).toMatchObject({ status: 400 });
  });
});
