// Storage that fails safe (issue 13 item 5) against real mounts and real servers: DATA_DIR on a read-only or a
// full tmpfs (start-up: one line, exit 78; routes: 507 in the error shape), firmware/songs symlinks out of their
// folder over HTTP, play-asset of an undecodable file, and 30 concurrent /admin/model calls. Needs root (mount).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeWav } from '../../src/audio/wav.js';
import { DEAD_AGENT, type RunningBridge, startTestBridge, TSX_LOADER } from '../support/bridge.js';
import { expectErrorShape, expectNoStack, post, request } from '../support/http.js';
import { freePort } from '../support/net.js';
import { connectRobot, startTestVoice, type TestVoice } from '../support/voice.js';

const CHILD = fileURLToPath(new URL('../support/bridge-child.ts', import.meta.url));
const mounts: string[] = [];
const cleanups: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  for (const dir of mounts.reverse()) {
    execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A tmpfs of its own at a fresh temp folder (unmounted in afterAll). */
function mountTmpfs(options: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'deskbot-storage-mnt-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir]);
  mounts.push(dir);
  return dir;
}

/** Writes zeros until the file system refuses with ENOSPC. */
function fill(dir: string): void {
  try {
    writeFileSync(join(dir, 'filler'), Buffer.alloc(64 * 1024 * 1024));
  } catch (error) {
    expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC');
    return;
  }
  throw new Error(`${dir} did not fill up`);
}

/** `deskbot bridge` (the real CLI path, from the sources) on `dataDir`: its exit code and what it printed. */
async function runBridgeCli(
  dataDir: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child: ChildProcess = spawn(process.execPath, ['--import', TSX_LOADER, CHILD], {
    env: { ...process.env, DATA_DIR: dataDir, BRIDGE_PORT: String(await freePort()), LOG_LEVEL: 'warn' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

describe('start-up on an unusable DATA_DIR: one line, exit 78', () => {
  it('a read-only file system', async () => {
    const dir = mountTmpfs('ro,size=1m');
    const run = await runBridgeCli(dir);
    expect(run.code, run.stderr).toBe(78);
    expect(run.stderr.trim().split('\n')).toEqual([
      `deskbot: data directory ${dir} is on a read-only file system (EROFS); free space or point DATA_DIR at a writable folder`,
    ]);
    expectNoStack(run.stderr);
    expect(run.stdout).toBe('');
  }, 40_000);

  it('a DATA_DIR that does not exist yet under a read-only mount', async () => {
    const dir = join(mountTmpfs('ro,size=1m'), 'data');
    const run = await runBridgeCli(dir);
    expect(run.code, run.stderr).toBe(78);
    expect(run.stderr).toMatch(/^deskbot: data directory .* is on a read-only file system \(EROFS\);/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expectNoStack(run.stderr);
  }, 40_000);

  it('a full file system', async () => {
    const dir = mountTmpfs('size=64k');
    fill(dir);
    const run = await runBridgeCli(dir);
    expect(run.code, run.stderr).toBe(78);
    expect(run.stderr.trim().split('\n')).toEqual([
      `deskbot: data directory ${dir} is full (ENOSPC); free space or point DATA_DIR at a writable folder`,
    ]);
    expectNoStack(run.stderr);
  }, 40_000);
});

describe('routes that write to a full, then read-only DATA_DIR: 507 in the error shape', () => {
  it('kid-mode, persona and memory_log answer 507 storage_full, then storage_read_only; nothing changes', async () => {
    const dir = mountTmpfs('size=8m');
    const running: RunningBridge = await startTestBridge({}, { dataDir: dir, agentCommand: DEAD_AGENT });
    cleanups.push(() => running.bridge.close());
    const ok = await post(running.url, '/admin/kid-mode', { enabled: false });
    expect(ok.status, ok.text).toBe(200);
    const toggles = readFileSync(running.state('toggles.json'), 'utf8');
    const soul = readFileSync(join(running.workspace, 'SOUL.md'), 'utf8');

    fill(dir);
    const writes = async (code: string) => {
      expectErrorShape(await post(running.url, '/admin/kid-mode', { enabled: true }), 507, code);
      expectErrorShape(
        await post(running.url, '/admin/persona', { file: 'SOUL.md', content: 'new soul' }),
        507,
        code,
      );
      expectErrorShape(
        await post(running.url, '/api/voice/memory_log', { user: 'hi', assistant: 'hello', session_id: 's' }),
        507,
        code,
      );
      expect(readFileSync(running.state('toggles.json'), 'utf8')).toBe(toggles);
      expect(readFileSync(join(running.workspace, 'SOUL.md'), 'utf8')).toBe(soul);
    };
    await writes('storage_full');
    // A daily log the full disk cut short is taken back, not left with part of the entry.
    expect(dailyLogs(running.workspace)).not.toContain('**User:** hi');

    rmSync(join(dir, 'filler'));
    execFileSync('mount', ['-o', 'remount,ro', dir]);
    await writes('storage_read_only');
    const reads = await request(running.url, 'GET', '/admin/safety');
    expect(reads.status, reads.text).toBe(200); // what needs no write still works
  }, 60_000);
});

/** Every daily memory log's text, concatenated. */
function dailyLogs(workspace: string): string {
  const dir = join(workspace, 'memory');
  if (!existsSync(dir)) return '';
  return readdirSync(dir)
    .map((name) => readFileSync(join(dir, name), 'utf8'))
    .join('\n');
}

describe('voice server: symlinks out of firmware/ and songs/, undecodable assets', () => {
  let t: TestVoice;
  const setUp = async () => {
    t = await startTestVoice();
    cleanups.push(() => t.close());
    const outside = join(t.dataDir, '..', `deskbot-outside-${process.pid}.bin`);
    writeFileSync(outside, 'SECRET-MARKER-OUTSIDE');
    cleanups.push(() => rmSync(outside, { force: true }));
    mkdirSync(join(t.dataDir, 'firmware'), { recursive: true });
    writeFileSync(join(t.dataDir, 'firmware', 'box_1.0.0.bin'), 'REAL-IMAGE');
    symlinkSync(outside, join(t.dataDir, 'firmware', 'box_9.9.9.bin'));
    mkdirSync(join(t.dataDir, 'songs'), { recursive: true });
    writeFileSync(join(t.dataDir, 'songs', 'purr.wav'), encodeWav(new Int16Array(4800), 24_000));
    writeFileSync(join(t.dataDir, 'songs', 'broken.mp3'), 'not audio, just text');
    const outsideWav = join(t.dataDir, '..', `deskbot-outside-${process.pid}.wav`);
    writeFileSync(outsideWav, encodeWav(new Int16Array(4800), 24_000));
    cleanups.push(() => rmSync(outsideWav, { force: true }));
    symlinkSync(outsideWav, join(t.dataDir, 'songs', 'leak.wav'));
  };

  it('a firmware symlink to a file outside is a 404; the real image is served', async () => {
    await setUp();
    const leak = await request(t.httpUrl, 'GET', '/device/ota/firmware/box_9.9.9.bin');
    expectErrorShape(leak, 404, 'firmware_not_found');
    expect(leak.text).not.toContain('SECRET-MARKER');
    const real = await request(t.httpUrl, 'GET', '/device/ota/firmware/box_1.0.0.bin');
    expect(real.status).toBe(200);
    expect(real.text).toBe('REAL-IMAGE');
  });

  it('play-asset: undecodable → 422 undecodable_asset, symlink out → 404, a real WAV → 200', async () => {
    const { robot } = await connectRobot(t);
    const play = (name: string) =>
      post(t.httpUrl, '/device/admin/play-asset', { name, device_id: robot.deviceId });
    expectErrorShape(await play('broken'), 422, 'undecodable_asset');
    expectErrorShape(await play('leak'), 404, 'unknown_asset');
    const ok = await play('purr');
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json).toMatchObject({ ok: true, name: 'purr' });
  }, 30_000);
});

describe('/admin/model under 30 concurrent calls', () => {
  it('the model the voice server runs last is the one models.json saves', async () => {
    // A stand-in voice server: records the order in which models became the running one, and answers each
    // call after a random delay (a busy server, a slow network).
    const applied: string[] = [];
    const voice: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        // Applied on arrival, acknowledged after a random delay: the answers come back in another order.
        if (req.url?.endsWith('/set-tier1slim-model')) applied.push(JSON.parse(body).model);
        setTimeout(
          () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'),
          Math.random() * 40,
        );
      });
    });
    await new Promise<void>((resolve) => voice.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => voice.close(() => resolve())));
    const voiceUrl = `http://127.0.0.1:${(voice.address() as AddressInfo).port}`;
    const dir = mkdtempSync(join(tmpdir(), 'deskbot-storage-model-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const running = await startTestBridge(
      { bridge: { voice_url: voiceUrl } },
      { dataDir: dir, agentCommand: DEAD_AGENT },
    );
    cleanups.push(() => running.bridge.close());

    const models = Array.from({ length: 30 }, (_, i) => `model-${i}`);
    const replies = await Promise.all(
      models.map((model) => post(running.url, '/admin/model', { daemon: 'voice', model })),
    );
    for (const reply of replies) expect(reply.status, reply.text).toBe(200);
    expect([...applied].sort()).toEqual([...models].sort());
    const saved = JSON.parse(readFileSync(running.state('models.json'), 'utf8')).voice;
    expect(saved).toBe(applied.at(-1));
  }, 60_000);
});
