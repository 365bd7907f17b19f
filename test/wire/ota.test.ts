// The boot (OTA) endpoint against real HTTP, and the virtual robot following its offers.
import { createHmac } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bootRequest } from '../../src/device/boot.js';
import { startTestVoice, type TestVoice } from '../support/voice.js';

let t: TestVoice | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const DEVICE = 'aa:bb:cc:dd:ee:ff';
const BOARD = 'deskbot-virtual';

function firmwareBody(version: string) {
  return bootRequest({
    identity: {
      deviceId: DEVICE,
      clientId: '3b7a0c8e-1f2d-4c5b-9a6e-7d8f9a0b1c2d',
      boardType: BOARD,
      appName: 'xiaozhi',
      language: 'en-US',
    },
    flash: {
      running: 'ota_0',
      partitions: { ota_0: { version, image: 'valid' }, ota_1: { version: '', image: 'empty' } },
    },
  });
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Device-Id': DEVICE, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

function addImage(dataDir: string, file: string, bytes: Uint8Array = new Uint8Array([0xe9, 1, 2, 3])) {
  mkdirSync(join(dataDir, 'firmware'), { recursive: true });
  writeFileSync(join(dataDir, 'firmware', file), bytes);
}

describe('boot response', () => {
  it('answers a real firmware body with websocket, server_time and never an mqtt key', async () => {
    t = await startTestVoice({ server: { timezone_offset_min: 60 } });
    const { headers, body } = firmwareBody('1.0.0');
    const before = Date.now();
    const { status, json } = await post(t.otaUrl, body, headers);
    expect(status).toBe(200);
    expect(json.websocket.url).toBe(`ws://127.0.0.1:${t.voice.wsPort}/device/v1/`);
    expect(json.server_time.timezone_offset).toBe(60);
    expect(json.server_time.timestamp).toBeGreaterThanOrEqual(before);
    expect(json).not.toHaveProperty('mqtt');
    expect(json).not.toHaveProperty('firmware');
    expect(json).not.toHaveProperty('activation');
  });

  it('answers GET, with or without the trailing slash, and accepts bodies with missing or extra fields', async () => {
    t = await startTestVoice();
    for (const path of ['/device/ota/', '/device/ota']) {
      const response = await fetch(`${t.httpUrl}${path}`, { headers: { 'Device-Id': DEVICE } });
      expect(response.status).toBe(200);
      expect(((await response.json()) as any).websocket.url).toContain('/device/v1/');
    }
    const sparse = await post(t.otaUrl, { application: { version: '1.0.0' }, future_field: { x: 1 } });
    expect(sparse.status).toBe(200);
  });

  it.each([
    ['malformed JSON', '{"version": 2,', 'malformed_json'],
    ['an array body', '[1,2]', 'invalid_body'],
    ['a string body', '"hello"', 'invalid_body'],
    // The fields the server reads (to pick a firmware image) are checked.
    ['application.version as a number', { application: { version: 1 } }, 'invalid_body'],
    ['application as text', { application: 'xiaozhi' }, 'invalid_body'],
    ['board.type as a number', { board: { type: 7 } }, 'invalid_body'],
  ])('refuses %s with 400 in the error shape', async (_name, body, code) => {
    t ??= await startTestVoice();
    const { status, json } = await post(t.otaUrl, body);
    expect(status).toBe(400);
    expect(json.error.code).toBe(code);
    expect(typeof json.error.message).toBe('string');
  });

  it.each([
    // Real clients differ from the firmware in fields the server never reads: any JSON type is accepted.
    ['minimum_free_heap_size as a number (browser test page)', { minimum_free_heap_size: 0 }],
    ['flash_size as text', { flash_size: 'big' }],
    ['partition_table of strings', { partition_table: ['ota_0'] }],
    ['null sections', { chip_info: null, application: null, board: null, ota: null, display: null }],
    ['zeros and empty strings', { version: 0, uuid: '', chip_model_name: '', mac_address: '' }],
  ])('accepts %s', async (_name, body) => {
    t ??= await startTestVoice();
    const { status, json } = await post(t.otaUrl, body);
    expect(status).toBe(200);
    expect(json.websocket.url).toContain('/device/v1/');
  });

  it('requires a MAC Device-Id', async () => {
    t = await startTestVoice();
    const missing = await fetch(t.otaUrl, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as any).error.code).toBe('missing_device_id');
    const bad = await post(t.otaUrl, {}, { 'Device-Id': 'robot-1' });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('bad_device_id');
    const upper = await post(t.otaUrl, {}, { 'Device-Id': 'AA:BB:CC:DD:EE:FF' });
    expect(upper.status).toBe(200);
  });

  it('carries a device token when auth is on, and the WS upgrade refuses a missing or wrong one with 401', async () => {
    t = await startTestVoice({ auth: { enabled: true, secret: 's3cret' } });
    const robot = t.robot();
    const ota = await robot.boot();
    expect(ota.websocket?.token).toMatch(/^[\w-]+\.[\w-]+$/);
    await robot.connect();
    expect(robot.connected).toBe(true);

    const ws = await import('ws');
    const attempt = (headers: Record<string, string>) =>
      new Promise<number>((resolve) => {
        const socket = new ws.default(`ws://127.0.0.1:${t!.voice.wsPort}/device/v1/`, { headers });
        socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        socket.on('open', () => resolve(101));
        socket.on('error', () => undefined);
      });
    expect(await attempt({ 'Device-Id': robot.deviceId })).toBe(401);
    expect(await attempt({ 'Device-Id': robot.deviceId, Authorization: 'Bearer nope.nope' })).toBe(401);
    expect(
      await attempt({ 'Device-Id': 'aa:aa:aa:aa:aa:aa', Authorization: `Bearer ${ota.websocket?.token}` }),
    ).toBe(401);
  });
});

describe('firmware offers', () => {
  it.each([
    ['1.9.9', '1.10.0', true],
    ['1.0', '1.0.1', true],
    ['1.0.1', '1.0.1', false],
    ['2.0.0', '1.10.0', false],
  ])('device %s, image %s → offered: %s', async (current, image, offered) => {
    t = await startTestVoice();
    addImage(t.dataDir, `${BOARD}_${image}.bin`);
    const { headers, body } = firmwareBody(current);
    const { json } = await post(t.otaUrl, body, headers);
    if (!offered) {
      expect(json).not.toHaveProperty('firmware');
      return;
    }
    expect(json.firmware).toEqual({
      version: image,
      url: `http://127.0.0.1:${t.voice.httpPort}/device/ota/firmware/${BOARD}_${image}.bin`,
      force: 0,
    });
    const download = await fetch(json.firmware.url);
    expect(download.status).toBe(200);
    expect(new Uint8Array(await download.arrayBuffer())).toEqual(new Uint8Array([0xe9, 1, 2, 3]));
  });

  it('offers an older pinned image with force = 1 when firmware.force is configured', async () => {
    t = await startTestVoice({ firmware: { force: true } });
    addImage(t.dataDir, `${BOARD}_1.0.0.bin`);
    const { headers, body } = firmwareBody('1.2.0');
    const { json } = await post(t.otaUrl, body, headers);
    expect(json.firmware).toMatchObject({ version: '1.0.0', force: 1 });
  });

  it('only serves safe firmware file names', async () => {
    t = await startTestVoice();
    addImage(t.dataDir, `${BOARD}_1.1.0.bin`);
    for (const name of ['..%2Factivations.json', '..%2F..%2Fetc%2Fpasswd', 'x.txt', 'missing_9.9.9.bin']) {
      const response = await fetch(`${t.httpUrl}/device/ota/firmware/${name}`);
      expect(response.status).toBe(404);
      expect(((await response.json()) as any).error.code).toMatch(/not_found/);
    }
  });

  it('the robot installs a newer image into the other partition, reboots and reports it', async () => {
    t = await startTestVoice();
    addImage(t.dataDir, `${BOARD}_1.1.0.bin`);
    const seen: string[] = [];
    const robot = t.robot({ firmwareVersion: '1.0.0', stateDir: join(t.dataDir, 'robot') });
    robot.on('rebooting', () => seen.push(`${robot.firmwareVersion}@${robot.partition}`));
    await robot.boot();
    expect(robot.firmwareVersion).toBe('1.1.0');
    expect(robot.partition).toBe('ota_1');
    expect(seen).toEqual(['1.1.0@ota_1']);
    expect(robot.ota).not.toHaveProperty('firmware');
    await robot.connect();
    expect(robot.connected).toBe(true);
  });

  it('an image that fails its check rolls back to the previous partition', async () => {
    t = await startTestVoice();
    addImage(t.dataDir, `${BOARD}_1.1.0.bin`, new Uint8Array([0x00, 0x01]));
    const robot = t.robot({ firmwareVersion: '1.0.0' });
    await robot.boot();
    expect(robot.stats.rollbacks).toBeGreaterThan(0);
    expect(robot.firmwareVersion).toBe('1.0.0');
    expect(robot.partition).toBe('ota_0');
  });

  it('an empty image is never offered', async () => {
    t = await startTestVoice();
    addImage(t.dataDir, `${BOARD}_1.1.0.bin`, new Uint8Array(0));
    const { headers, body } = firmwareBody('1.0.0');
    expect((await post(t.otaUrl, body, headers)).json).not.toHaveProperty('firmware');
  });
});

describe('activation (Activation-Version 2)', () => {
  const key = 'a'.repeat(64);
  const v2 = { 'Activation-Version': '2', 'Serial-Number': 'SN'.padEnd(32, '0') };

  it('202 while waiting, 403 for a wrong HMAC, 200 for the right one, then no activation block', async () => {
    t = await startTestVoice({ activation: { hmac_key: key } });
    const activateUrl = `${t.httpUrl}/device/ota/activate`;
    expect((await post(activateUrl, {})).status).toBe(200); // nothing pending yet

    const first = await post(t.otaUrl, {}, v2);
    const { challenge, code, timeout_ms } = first.json.activation;
    expect(challenge).toMatch(/^[0-9a-f]{32}$/);
    expect(code).toMatch(/^\d{6}$/);
    expect(timeout_ms).toBeGreaterThan(0);
    expect((await post(t.otaUrl, {}, v2)).json.activation.challenge).toBe(challenge);

    expect((await post(activateUrl, { challenge })).status).toBe(202);
    const wrong = await post(activateUrl, { challenge, hmac: 'f'.repeat(64) });
    expect(wrong.status).toBe(403);
    expect(wrong.json.error.code).toBe('activation_refused');
    const hmac = createHmac('sha256', Buffer.from(key, 'hex')).update(challenge).digest('hex');
    expect((await post(activateUrl, { algorithm: 'hmac-sha256', challenge, hmac })).status).toBe(200);
    expect((await post(t.otaUrl, {}, v2)).json).not.toHaveProperty('activation');
  });

  it('the robot with a serial and eFuse key activates itself during boot', async () => {
    t = await startTestVoice({ activation: { hmac_key: key } });
    const robot = t.robot({ serialNumber: v2['Serial-Number'], hmacKey: key });
    await robot.boot();
    const again = await post(t.otaUrl, {}, { ...v2, 'Device-Id': robot.deviceId });
    expect(again.json).not.toHaveProperty('activation');
  });

  it('Activation-Version 1 devices never get an activation block', async () => {
    t = await startTestVoice({ activation: { hmac_key: key } });
    expect((await post(t.otaUrl, {}, { 'Activation-Version': '1' })).json).not.toHaveProperty('activation');
  });
});

describe('boot retries', () => {
  it('retries with exponential backoff and gives up after the configured attempts', async () => {
    const { VirtualRobot } = await import('../../src/device/robot.js');
    const robot = new VirtualRobot({
      otaUrl: 'http://127.0.0.1:1/device/ota/',
      retryBaseMs: 5,
      maxBootAttempts: 4,
    });
    const logged: number[] = [];
    const started = Date.now();
    await expect(
      robot.boot().catch((error: Error) => {
        logged.push(Date.now() - started);
        throw error;
      }),
    ).rejects.toThrow(/failed 4 times/);
    // 5 + 10 + 20 ms of backoff at least
    expect(logged[0]).toBeGreaterThanOrEqual(35);
  });
});
