// OTA helpers: version comparison as the firmware does it, Device-Id normalisation, the firmware offer
// decision, the firmware store on disk, and per-device WebSocket tokens.
import { createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareVersions, normaliseDeviceId } from '../../src/protocol/index.js';
import { issueDeviceToken, verifyDeviceToken } from '../../src/voice/device-token.js';
import { decideFirmware, type FirmwareImage, FirmwareStore } from '../../src/voice/firmware-store.js';

describe('compareVersions', () => {
  it.each<[string, string, number | null]>([
    ['1.10.0', '1.9.9', 1],
    ['1.9.9', '1.10.0', -1],
    ['1.0.1', '1.0', 1],
    ['1.0', '1.0.1', -1],
    ['1.0', '1.0.0', 0],
    ['1.0.0', '1', 0],
    ['2', '1.99.99', 1],
    ['v1.2.3', '1.2.3', 0],
    ['V1.2.4', 'v1.2.3', 1],
    [' 1.2.3 ', '1.2.3', 0],
    ['1.02', '1.2', 0],
    ['1.2.3-beta', '1.2.3', null],
    ['abc', '1.0', null],
    ['1.0', '', null],
    ['1..0', '1.0', null],
    ['1.0.', '1.0', null],
    ['-1', '1', null],
  ])('%s vs %s → %s', (a, b, expected) => {
    expect(compareVersions(a, b)).toBe(expected);
  });
});

describe('normaliseDeviceId', () => {
  it.each<[string, string | null]>([
    ['aa:bb:cc:dd:ee:ff', 'aa:bb:cc:dd:ee:ff'],
    ['AA:BB:CC:DD:EE:0F', 'aa:bb:cc:dd:ee:0f'],
    ['  aa:bb:cc:dd:ee:ff\n', 'aa:bb:cc:dd:ee:ff'],
    ['aa-bb-cc-dd-ee-ff', null],
    ['aabbccddeeff', null],
    ['aa:bb:cc:dd:ee', null],
    ['aa:bb:cc:dd:ee:ff:00', null],
    ['gg:bb:cc:dd:ee:ff', null],
    ['a:bb:cc:dd:ee:ff', null],
    ['', null],
  ])('%j → %j', (input, expected) => {
    expect(normaliseDeviceId(input)).toBe(expected);
  });
});

describe('decideFirmware', () => {
  const image: FirmwareImage = { board: 'pip', version: '1.2.0', file: 'pip_1.2.0.bin' };
  it.each<[string, string, FirmwareImage | undefined, boolean, { offer: boolean; force?: boolean }]>([
    ['newer', '1.1.9', image, false, { offer: true, force: false }],
    ['newer, force configured: still not forced', '1.1.9', image, true, { offer: true, force: false }],
    [
      'newer by numeric part',
      '1.0.10',
      { ...image, version: '1.0.11' },
      false,
      { offer: true, force: false },
    ],
    ['same', '1.2.0', image, false, { offer: false }],
    ['same, force configured', '1.2.0', image, true, { offer: false }],
    ['same spelled 1.2', '1.2', image, true, { offer: false }],
    ['older', '1.3.0', image, false, { offer: false }],
    ['older, force configured', '1.3.0', image, true, { offer: true, force: true }],
    ['non-numeric current', '1.2.0-dev', image, true, { offer: false }],
    ['non-numeric image', '1.0.0', { ...image, version: 'latest' }, true, { offer: false }],
    ['no image', '1.0.0', undefined, true, { offer: false }],
  ])('%s', (_name, current, img, force, expected) => {
    const decision = decideFirmware(current, img, force);
    expect(decision.offer).toBe(expected.offer);
    if (decision.offer) {
      expect(decision.force).toBe(expected.force);
      expect(decision.image).toBe(img);
    }
  });
});

describe('FirmwareStore', () => {
  let root: string;
  let dir: string;
  const put = (name: string, content = 'firmware') => writeFileSync(join(dir, name), content);

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'deskbot-fw-'));
    dir = join(root, 'firmware');
    mkdirSync(dir);
    put('pip_1.2.0.bin');
    put('pip_1.10.0.bin');
    put('pip_v1.9.0.bin');
    put('pip_2.0.0.bin', ''); // empty: ignored
    put('esp32_s3_box_3.1.bin');
    put('generic.bin');
    put('.hidden.bin');
    put('notes.txt');
    mkdirSync(join(dir, 'dir_9.0.bin'));
    mkdirSync(join(dir, 'a'));
    writeFileSync(join(dir, 'a', 'b.bin'), 'x');
    writeFileSync(join(root, 'x.bin'), 'outside');
    writeFileSync(
      join(dir, 'manifest.json'),
      JSON.stringify({
        images: [
          { board: '*', version: '1.5.0', file: 'generic.bin' },
          { board: '*', version: '9.0.0', file: 'missing.bin' },
          { board: '*', version: '9.0.0', file: '../x.bin' },
          { board: '*', version: 'newest', file: 'generic.bin' },
          { board: 5, version: '9.0.0', file: 'generic.bin' },
        ],
      }),
    );
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('lists images from the manifest and from <board>_<version>.bin names, skipping empty or missing files', () => {
    const list = new FirmwareStore(dir).list();
    expect(list).toHaveLength(5);
    expect(list).toEqual(
      expect.arrayContaining([
        { board: '*', version: '1.5.0', file: 'generic.bin' },
        { board: 'pip', version: '1.2.0', file: 'pip_1.2.0.bin' },
        { board: 'pip', version: '1.10.0', file: 'pip_1.10.0.bin' },
        { board: 'pip', version: '1.9.0', file: 'pip_v1.9.0.bin' },
        { board: 'esp32_s3_box', version: '3.1', file: 'esp32_s3_box_3.1.bin' },
      ]),
    );
  });

  it.each([
    ['pip', 'pip_1.10.0.bin'],
    ['esp32_s3_box', 'esp32_s3_box_3.1.bin'],
    ['unknown-board', 'generic.bin'],
  ])('latestFor(%s) → %s', (board, file) => {
    expect(new FirmwareStore(dir).latestFor(board)?.file).toBe(file);
  });

  it('a "*" image wins when it is newer than the board image', () => {
    const other = mkdtempSync(join(tmpdir(), 'deskbot-fw-'));
    try {
      writeFileSync(join(other, 'pip_1.0.0.bin'), 'x');
      writeFileSync(join(other, 'all.bin'), 'x');
      writeFileSync(
        join(other, 'manifest.json'),
        '{"images":[{"board":"*","version":"1.0.1","file":"all.bin"}]}',
      );
      expect(new FirmwareStore(other).latestFor('pip')?.file).toBe('all.bin');
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('a broken manifest still leaves file-name images; a missing folder is empty', () => {
    const other = mkdtempSync(join(tmpdir(), 'deskbot-fw-'));
    try {
      writeFileSync(join(other, 'pip_1.0.0.bin'), 'x');
      writeFileSync(join(other, 'manifest.json'), '{"images": [');
      expect(new FirmwareStore(other).latestFor('pip')?.file).toBe('pip_1.0.0.bin');
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
    expect(new FirmwareStore(join(root, 'nope')).list()).toEqual([]);
    expect(new FirmwareStore(join(root, 'nope')).latestFor('pip')).toBeUndefined();
  });

  it('pathOf serves a present, non-empty, plainly named image', () => {
    expect(new FirmwareStore(dir).pathOf('pip_1.2.0.bin')).toBe(join(dir, 'pip_1.2.0.bin'));
  });

  it.each([
    '../x.bin',
    'a/b.bin',
    '.hidden.bin',
    'notes.txt',
    'x.txt',
    'pip_2.0.0.bin',
    'missing.bin',
    'dir_9.0.bin',
    '',
    '/etc/passwd',
    'a\\b.bin',
    '%2e%2e%2fx.bin',
  ])('pathOf(%j) → undefined', (name) => {
    expect(new FirmwareStore(dir).pathOf(name)).toBeUndefined();
  });
});

describe('device tokens', () => {
  const secret = 'test-secret';
  const device = 'aa:bb:cc:dd:ee:ff';
  const now = 1_700_000_000_000;
  const token = issueDeviceToken(secret, device, 60, now);

  it.each<[string, () => ReturnType<typeof verifyDeviceToken>, ReturnType<typeof verifyDeviceToken>]>([
    ['valid right away', () => verifyDeviceToken(secret, token, device, now), { ok: true }],
    [
      'valid one second before expiry',
      () => verifyDeviceToken(secret, token, device, now + 59_000),
      { ok: true },
    ],
    [
      'expired at ttl',
      () => verifyDeviceToken(secret, token, device, now + 60_000),
      { ok: false, reason: 'expired' },
    ],
    [
      'expired later',
      () => verifyDeviceToken(secret, token, device, now + 86_400_000),
      { ok: false, reason: 'expired' },
    ],
    [
      'wrong device',
      () => verifyDeviceToken(secret, token, '11:22:33:44:55:66', now),
      { ok: false, reason: 'wrong_device' },
    ],
    [
      'other secret',
      () => verifyDeviceToken('other', token, device, now),
      { ok: false, reason: 'bad_signature' },
    ],
  ])('%s', (_name, check, expected) => {
    expect(check()).toEqual(expected);
  });

  it('a tampered signature or body is refused', () => {
    const [body, signature] = token.split('.') as [string, string];
    const flipped = signature.slice(0, -1) + (signature.endsWith('A') ? 'B' : 'A');
    expect(verifyDeviceToken(secret, `${body}.${flipped}`, device, now)).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    expect(verifyDeviceToken(secret, `${body}.${signature.slice(1)}`, device, now)).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    const longer = Buffer.from(`${device}.${Math.floor(now / 1000) + 999_999}`).toString('base64url');
    expect(verifyDeviceToken(secret, `${longer}.${signature}`, device, now)).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
  });

  it.each(['', 'abc', '.', 'a.', '.b', 'a.b.c', `${token}.x`])('malformed %j', (bad) => {
    expect(verifyDeviceToken(secret, bad, device, now)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('a correctly signed body without an expiry is malformed, not accepted', () => {
    const body = Buffer.from('no-dot-here').toString('base64url');
    const signature = createHmac('sha256', secret).update(body).digest('base64url');
    expect(verifyDeviceToken(secret, `${body}.${signature}`, 'no-dot-here', now)).toEqual({
      ok: false,
      reason: 'malformed',
    });
  });

  it('tokens differ per device and per expiry', () => {
    expect(issueDeviceToken(secret, '11:22:33:44:55:66', 60, now)).not.toBe(token);
    expect(issueDeviceToken(secret, device, 61, now)).not.toBe(token);
    expect(issueDeviceToken(secret, device, 60, now)).toBe(token);
  });
});
