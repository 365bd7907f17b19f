// Path traversal through every route that turns input into a file name (DESIGN §2): firmware downloads (voice
// server), play-asset names (voice server) and persona files (bridge). Each refusal is a 400/404 in the error
// shape, and marker files outside the folder each route serves are never read (their content never comes
// back, no audio is played) nor written (byte-identical, no new files next to them).
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeWav } from '../../src/audio/wav.js';
import type { VirtualRobot } from '../../src/device/robot.js';
import { send } from '../support/bad-input.js';
import { DEAD_AGENT, type RunningBridge, startTestBridge } from '../support/bridge.js';
import { expectErrorShape } from '../support/http.js';
import { connectRobot, startTestVoice, type TestVoice } from '../support/voice.js';

const MARKER = `MARKER-${randomUUID()}`;
const IMAGE = Buffer.from(`real firmware image ${randomUUID()}`);
const beep = encodeWav(new Int16Array(1600).fill(1000), 16_000);

/**
 * root/ holds markers; root/data is the data dir, itself holding markers outside firmware/, songs/, workspace/.
 * Made at import, because the absolute-path attacks name it in their test titles.
 */
const root = mkdtempSync(join(tmpdir(), 'deskbot-traversal-'));
const dataDir = join(root, 'data');
let t: TestVoice;
let robot: VirtualRobot;
let bridge: RunningBridge | undefined;

/** Every file under root with its bytes, to prove nothing was written or created outside the served folders. */
function snapshot(dir = root): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    if (path.includes(`${join(dataDir, 'workspace')}`) || path.includes(join(dataDir, 'state'))) continue;
    files.set(path, readFileSync(path).toString('base64'));
  }
  return files;
}

beforeAll(async () => {
  for (const dir of [join(dataDir, 'firmware'), join(dataDir, 'songs')]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(dataDir, 'firmware', 'board_1.0.0.bin'), IMAGE);
  writeFileSync(join(dataDir, 'songs', 'tune.wav'), beep);
  // Markers one and two levels above the served folders, named so they would pass the name checks if the
  // path around them did.
  for (const dir of [root, dataDir]) {
    writeFileSync(join(dir, 'secret_9.9.9.bin'), MARKER);
    writeFileSync(join(dir, 'secret.wav'), Buffer.concat([beep, Buffer.from(MARKER)]));
    writeFileSync(join(dir, 'marker.md'), MARKER);
  }
  t = await startTestVoice({ data_dir: dataDir });
});
afterAll(async () => {
  await bridge?.bridge.close();
  await t?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('GET /device/ota/firmware/:file', () => {
  it('serves a real image (the route works)', async () => {
    const reply = await send(t.httpUrl, { method: 'GET', path: '/device/ota/firmware/board_1.0.0.bin' });
    expect(reply.status).toBe(200);
    expect(reply.text).toBe(IMAGE.toString());
  });

  const ATTACKS = [
    '/device/ota/firmware/..%2f..%2fsecret_9.9.9.bin',
    '/device/ota/firmware/..%2fsecret_9.9.9.bin',
    '/device/ota/firmware/..%2F..%2Fetc%2Fpasswd',
    '/device/ota/firmware/%2e%2e%2f%2e%2e%2fsecret_9.9.9.bin',
    '/device/ota/firmware/%2e%2e/%2e%2e/secret_9.9.9.bin',
    '/device/ota/firmware/..%252f..%252fsecret_9.9.9.bin',
    '/device/ota/firmware/%252e%252e%252fsecret_9.9.9.bin',
    '/device/ota/firmware/....//....//secret_9.9.9.bin',
    '/device/ota/firmware/....%2f%2f....%2f%2fsecret_9.9.9.bin',
    '/device/ota/firmware/../../secret_9.9.9.bin',
    '/device/ota/firmware/..%5c..%5csecret_9.9.9.bin',
    '/device/ota/firmware/..\\..\\secret_9.9.9.bin',
    '/device/ota/firmware/%2fetc%2fpasswd',
    `/device/ota/firmware/${encodeURIComponent(join(root, 'secret_9.9.9.bin'))}`,
    `/device/ota/firmware${join(root, 'secret_9.9.9.bin')}`,
    '/device/ota/firmware/board_1.0.0.bin%00/../../secret_9.9.9.bin',
    '/device/ota/firmware/secret_9.9.9.bin%00.bin',
    '/device/ota/firmware/.%2e/.%2e/secret_9.9.9.bin',
    '/device/ota/firmware/%c0%ae%c0%ae%c0%afsecret_9.9.9.bin',
    '/device/ota/firmware/;/../../secret_9.9.9.bin',
  ];
  it.each(ATTACKS)('%s → 400/404, nothing outside firmware/ read', async (path) => {
    const before = snapshot();
    const reply = await send(t.httpUrl, { method: 'GET', path });
    expectErrorShape(reply, (s) => s === 400 || s === 404);
    expect(reply.text).not.toContain(MARKER);
    expect(reply.text).not.toContain('root:');
    expect(snapshot()).toEqual(before);
  });
});

describe('POST /device/admin/play-asset', () => {
  const NAMES = [
    '../secret',
    '../secret.wav',
    '../../secret.wav',
    'songs/../../secret',
    '....//secret',
    '..',
    '.',
    join(root, 'secret.wav'),
    '/etc/passwd',
    'tune\u0000',
    'tune.wav\u0000../../secret',
    '..\\secret',
    '..\\..\\secret.wav',
    'C:\\secret.wav',
    '%2e%2e%2fsecret',
    '%2e%2e/secret',
    '\u2025/secret',
    '..\u2215secret',
    '～/secret',
  ];
  const play = (name: string) =>
    send(t.httpUrl, {
      method: 'POST',
      path: '/device/admin/play-asset',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });

  it('refuses an unsafe name with 400 before anything else, even with no device connected', async () => {
    expect(t.voice.registry.list()).toEqual([]);
    expectErrorShape(await play('../../secret.wav'), 400, 'unsafe_name');
    expectErrorShape(await play('tune'), 503, 'no_device');
  });

  it('plays a real asset (the route works)', async () => {
    ({ robot } = await connectRobot(t));
    const reply = await play('tune');
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json).toMatchObject({ ok: true, name: 'tune' });
    await robot.waitFor((frame) => frame.type === 'tts' && frame.state === 'stop', 10_000);
  });

  it.each(NAMES.map((name) => [JSON.stringify(name), name]))(
    '%s → 400/404, no file outside songs/ played',
    async (_label, name) => {
      const before = snapshot();
      let spoke = false;
      const onFrame = (frame: { type?: string }) => {
        if (frame.type === 'tts') spoke = true;
      };
      robot.on('frame', onFrame);
      const reply = await play(name);
      expectErrorShape(reply, (s) => s === 400 || s === 404);
      expect(reply.text).not.toContain(MARKER);
      // A served file would start a reply at once; give it the time it would need.
      await new Promise((resolve) => setTimeout(resolve, 50));
      robot.off('frame', onFrame);
      expect(spoke, 'the robot was sent audio').toBe(false);
      expect(snapshot()).toEqual(before);
    },
  );

  it('lists only the songs folder', async () => {
    const reply = await send(t.httpUrl, { method: 'GET', path: '/device/admin/songs' });
    expect(reply.json.songs.map((song: { name: string }) => song.name)).toEqual(['tune']);
  });
});

describe('POST /admin/persona (bridge)', () => {
  const FILES = [
    '../marker.md',
    '../../marker.md',
    'SOUL.md/../../marker.md',
    'SOUL.md/../../../marker.md',
    '../workspace/SOUL.md',
    './SOUL.md',
    'SOUL.md/',
    'soul.md',
    ' SOUL.md',
    'SOUL.md\u0000',
    'SOUL.md\u0000/../../marker.md',
    '/etc/passwd',
    join(root, 'marker.md'),
    '%2e%2e%2fmarker.md',
    '%2e%2e%2f%2e%2e%2fmarker.md',
    '..%2f..%2fmarker.md',
    '..\\..\\marker.md',
    'C:\\marker.md',
    'memory/../../marker.md',
    '....//....//marker.md',
  ];

  beforeAll(async () => {
    bridge = await startTestBridge({}, { dataDir, agentCommand: DEAD_AGENT });
  }, 60_000);

  it.each(FILES.map((file) => [JSON.stringify(file), file]))(
    '%s → 400, nothing written or read',
    async (_label, file) => {
      const before = snapshot();
      const reply = await send(bridge!.url, {
        method: 'POST',
        path: '/admin/persona',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ file, content: `pwned ${MARKER}` }),
      });
      expectErrorShape(reply, 400);
      expect(reply.text).not.toContain(MARKER);
      expect(snapshot()).toEqual(before);
      expect(readFileSync(join(root, 'marker.md'), 'utf8')).toBe(MARKER);
      expect(readFileSync(join(dataDir, 'marker.md'), 'utf8')).toBe(MARKER);
    },
  );

  it('writes a real persona file (the route works)', async () => {
    const reply = await send(bridge!.url, {
      method: 'POST',
      path: '/admin/persona',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ file: 'SOUL.md', content: 'kind and curious' }),
    });
    expect(reply.status, reply.text).toBe(200);
    expect(readFileSync(join(dataDir, 'workspace', 'SOUL.md'), 'utf8')).toBe('kind and curious');
  });

  it('refuses an encoded path to the route itself without reaching another file', async () => {
    for (const path of [
      '/admin/%2e%2e/admin/persona',
      '/admin/persona/..%2f..%2fmarker.md',
      '/admin/persona%00',
    ]) {
      const reply = await send(bridge!.url, {
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ file: 'SOUL.md', content: MARKER }),
      });
      expectErrorShape(reply, (s) => s === 400 || s === 404);
    }
    expect(readFileSync(join(dataDir, 'workspace', 'SOUL.md'), 'utf8')).toBe('kind and curious');
  });
});
