// Robustness: 100,000 random, mutated and hostile device frames into one running voice server, across binary
// protocol versions 1, 2 and 3, in batches of one fresh connection each. The server must not crash (an uncaught
// error anywhere fails the run), must keep each connection through any stream of bad frames (the device is
// unforgiving: no drop for one bad frame) and answer it afterwards, must close connections that break the
// WebSocket rules themselves with the proper close code, and must end with no session, socket or timer left.
// The seed is fixed and printed; FUZZ_SEED=<n> replays another.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getActiveResourcesInfo } from 'node:process';
import { Writable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { VirtualRobot } from '../../src/device/robot.js';
import type { BinaryVersion } from '../../src/protocol/index.js';
import { startVoiceServer, type VoiceServer } from '../../src/voice/server.js';
import { messages } from '../support/device-fuzz.js';
import { eventually } from '../support/voice.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261121);
const TOTAL_FRAMES = 100_000;
const BATCH_FRAMES = 4_000;
/** src/voice/ws-listener.ts WS_MAX_PAYLOAD_BYTES: above it the WebSocket layer itself closes with 1009. */
const WS_MAX_PAYLOAD = 4 * 1024 * 1024;
const PROPER_CLOSE = { invalidUtf8: 1007, tooBig: 1009 } as const;

/** How a batch's connection ends: kept and answered, or broken at the WebSocket layer. */
type Ending = 'answered' | 'invalid-utf8' | 'over-ws-limit' | 'tcp-drop';
const ENDINGS: Ending[] = ['answered', 'invalid-utf8', 'answered', 'over-ws-limit', 'answered', 'tcp-drop'];

let voice: VoiceServer;
let dataDir: string;
let otaUrl: string;
let httpUrl: string;
let loggedBytes = 0;
const robot = (protocolVersion: BinaryVersion = 1) =>
  new VirtualRobot({ otaUrl, retryBaseMs: 20, protocolVersion });
/** A full collection without --expose-gc on the command line, so heap numbers compare live objects only. */
const gc = (): void => {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
};
const handles = () => {
  const counts: Record<string, number> = {};
  for (const kind of getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
};

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'deskbot-fuzz-'));
  // Not startTestVoice: its silent logger would skip every log call, and serialising hostile values into log
  // lines is a way to crash too. Everything is logged (to nowhere).
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      loggedBytes += chunk.length;
      done();
    },
  });
  const config = parseConfig({
    data_dir: dataDir,
    server: { bind_host: '127.0.0.1', ws_port: 0, http_port: 0 },
    // Fuzzed detect texts start real turns: their relays and model calls go to a port nothing listens on,
    // never to whatever happens to run on the default localhost:8080.
    bridge: { url: 'http://127.0.0.1:9' },
    LLM: { TwoTier: { url: 'http://127.0.0.1:9/v1' } },
  });
  voice = await startVoiceServer(config, pino({ level: 'trace' }, sink));
  httpUrl = `http://127.0.0.1:${voice.httpPort}`;
  otaUrl = `${httpUrl}/device/ota/`;
});
afterAll(async () => {
  await voice?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** Sends one batch on a fresh connection; returns how many frames went out and the session's rejections. */
async function runBatch(
  version: BinaryVersion,
  batch: number,
  ending: Ending,
): Promise<{ sent: number; rejected: number }> {
  const device = robot(version);
  await device.start();
  const session = await eventually(() => voice.registry.get(device.deviceId));
  let closeCode: number | undefined;
  device.on('disconnected', (code) => {
    closeCode = code;
  });
  const frames = fc.sample(messages(version), { numRuns: BATCH_FRAMES, seed: SEED + batch });
  for (const [index, m] of frames.entries()) {
    // A plain check: an expect() per frame costs more than the frame.
    if (closeCode !== undefined)
      expect.fail(`v${version} batch ${batch}: closed (${closeCode}) before frame ${index}`);
    device.sendRaw(m.data, m.binary);
    // Let the server read as we go, as a real link would; unbounded buffering is not what is under test.
    if (index % 250 === 0) await new Promise((resolve) => setImmediate(resolve));
  }

  // Frames on one connection are handled in order: a hello answered now means every frame above was read.
  const reply = device.waitFor((frame) => frame.type === 'hello', 15_000);
  device.sendJson({ type: 'hello', version, transport: 'websocket', features: { mcp: true } });
  expect(await reply).toMatchObject({ type: 'hello', session_id: session.sessionId });
  expect(closeCode).toBeUndefined();
  expect(session.isClosed).toBe(false);
  expect(voice.registry.get(device.deviceId)).toBe(session);
  const rejected = session.stats.rejectedFrames;

  if (ending === 'answered') {
    device.disconnect();
  } else if (ending === 'tcp-drop') {
    device.dropConnection();
  } else {
    const breaking =
      ending === 'invalid-utf8'
        ? Uint8Array.from([0x7b, 0x22, 0xc3, 0x28, 0xff, 0xfe, 0x22, 0x7d]) // a text frame that is not UTF-8
        : new Uint8Array(WS_MAX_PAYLOAD + 1);
    device.sendRaw(breaking, ending === 'over-ws-limit');
    const expected = ending === 'invalid-utf8' ? PROPER_CLOSE.invalidUtf8 : PROPER_CLOSE.tooBig;
    await eventually(() => closeCode !== undefined, 10_000);
    expect(closeCode, `v${version} batch ${batch}: close code after ${ending}`).toBe(expected);
  }
  await eventually(() => session.isClosed && !voice.registry.get(device.deviceId), 10_000);
  // The virtual firmware repaints its LEDs every 200 ms until stopped; left running it would hold the device.
  device.firmware.stop();
  return { sent: frames.length, rejected };
}

describe('fuzzed device frames', () => {
  it(`${TOTAL_FRAMES.toLocaleString('en')} hostile frames across binary versions 1, 2 and 3 leave the server whole`, async () => {
    console.info(`device frame fuzz: seed ${SEED} (replay with FUZZ_SEED=${SEED})`);
    // Warm up (one device through boot, hello and MCP) so the baseline holds the server's steady state.
    const warm = robot();
    await warm.start();
    warm.disconnect();
    warm.firmware.stop();
    await eventually(() => voice.registry.list().length === 0, 10_000);
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const handlesBefore = handles();
    const started = Date.now();
    const cpuBefore = process.cpuUsage();

    const batches = Math.ceil(TOTAL_FRAMES / BATCH_FRAMES);
    const perVersion: Record<BinaryVersion, { sent: number; rejected: number }> = {
      1: { sent: 0, rejected: 0 },
      2: { sent: 0, rejected: 0 },
      3: { sent: 0, rejected: 0 },
    };
    for (let batch = 0; batch < batches; batch++) {
      const version = ((batch % 3) + 1) as BinaryVersion;
      const result = await runBatch(version, batch, ENDINGS[batch % ENDINGS.length]!);
      perVersion[version].sent += result.sent;
      perVersion[version].rejected += result.rejected;
    }
    const sent = perVersion[1].sent + perVersion[2].sent + perVersion[3].sent;
    expect(sent).toBeGreaterThanOrEqual(TOTAL_FRAMES);
    for (const version of [2, 3] as const) expect(perVersion[version].rejected).toBeGreaterThan(1000);

    // A fresh device still gets its hello, and MCP works both ways on it.
    const fresh = robot(3);
    await fresh.start();
    const session = await eventually(() => voice.registry.get(fresh.deviceId));
    expect(fresh.sessionId).toBe(session.sessionId);
    expect(JSON.stringify(await session.mcp.callTool('self.get_device_status'))).toContain('audio_speaker');
    expect((await fetch(`${httpUrl}/device/admin/devices`)).status).toBe(200);
    fresh.disconnect();
    fresh.firmware.stop();

    // No prototype took a key from a frame.
    expect(Object.keys(Object.prototype)).toEqual([]);
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();

    // Back to normal: no session, no socket, no timer left behind, and no heap kept.
    await eventually(() => voice.registry.list().length === 0, 10_000);
    await eventually(() => {
      const now = handles();
      return Object.keys({ ...now, ...handlesBefore }).every(
        (kind) => (now[kind] ?? 0) <= (handlesBefore[kind] ?? 0),
      );
    }, 15_000).catch(() => expect(handles(), 'handles left after the fuzz').toEqual(handlesBefore));
    gc();
    const heapGrowthMb = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
    const seconds = (Date.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    console.info(
      `device frame fuzz: ${sent} frames in ${seconds.toFixed(1)} s (${((cpu.user + cpu.system) / 1e6).toFixed(1)} s CPU); ` +
        `rejected v1 ${perVersion[1].rejected}, ` +
        `v2 ${perVersion[2].rejected}, v3 ${perVersion[3].rejected}; heap ${heapGrowthMb.toFixed(1)} MiB; ` +
        `${(loggedBytes / 2 ** 20).toFixed(1)} MiB logged`,
    );
    expect(heapGrowthMb).toBeLessThan(32);
  }, 120_000);
});
