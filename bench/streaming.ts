// Streaming cost: N robots stream the utterance in a loop (listen auto, real time) for `duration` seconds.
// The server runs alone in a child process, so its CPU and RSS are its own. The bench ASR hears nothing
// here, so every utterance the VAD finds is dropped as too short: the cost is WebSocket + decode + VAD.
import { setTimeout as delay } from 'node:timers/promises';
import type { VirtualRobot } from '../src/device/robot.js';
import type { Utterance } from './audio.js';
import { scaledMs, startRobots, stopRobots, streamPackets, waitUntil } from './fleet.js';
import { ServerChild, type ServerSample } from './ipc.js';
import { cpuMs } from './latency.js';
import type { BenchLatencies } from './providers.js';
import { fmt, heading, MB, printPairs } from './stats.js';

export interface StreamingOptions {
  devices: number;
  durationSec: number;
  latencies: BenchLatencies;
  utterance: Utterance;
}

const WARMUP_MS = 2000;

export async function runStreaming(options: StreamingOptions): Promise<void> {
  const { devices, durationSec, utterance } = options;
  heading(`Streaming: ${devices} devices streaming Opus for ${durationSec} s (server in a child process)`);
  const server = await ServerChild.start({ ...options.latencies, asrText: '' });
  await delay(500);
  const idle = await server.sample(true);
  const controller = new AbortController();
  const streams: Promise<void>[] = [];
  let robots: VirtualRobot[] = [];
  try {
    robots = await startRobots(server.otaUrl, devices);
    const attached = await waitUntil(
      async () => (await server.sample()).attached >= devices,
      scaledMs(10_000, devices, 50),
    );
    if (!attached) console.log('  warning: not all conversations attached; figures are per requested device');
    await delay(1000);
    const connected = await server.sample(true);
    const idleCpu = await measureCpu(server, 2000);

    const loopMs = utterance.packets.length * 60;
    const startStreaming = (from: number, to: number) => {
      const t0 = performance.now() + 50;
      for (let i = from; i < to; i++) {
        const robot = robots[i]!;
        robot.listen('start', 'auto');
        streams.push(
          (async () => {
            // Spread devices evenly over one packet period, as independent devices would be.
            let startAt = t0 + ((i - from) / (to - from)) * 60;
            while (!controller.signal.aborted && robot.connected) {
              await streamPackets(robot, utterance.packets, startAt, controller.signal);
              startAt += loopMs;
            }
          })(),
        );
      }
    };
    // Half the devices first, then all: the difference is the marginal cost of one more device,
    // free of one-off costs (model arenas, JIT, heap growth).
    const half = Math.floor(devices / 2);
    let halfWindow: Window | undefined;
    if (half > 0) {
      startStreaming(0, half);
      halfWindow = await measureWindow(server, (durationSec * 1000) / 2);
    }
    startStreaming(half, devices);
    const full = await measureWindow(server, durationSec * 1000);
    controller.abort();
    await Promise.all(streams);

    const perDevice = full.serverFraction / devices;
    const marginal = halfWindow
      ? (full.serverFraction - halfWindow.serverFraction) / (devices - half)
      : Number.NaN;
    const expectedUtterances = Math.floor((devices * full.wallMs) / loopMs);
    const perConn = (s: ServerSample, key: 'rss' | 'heapUsed' | 'external') =>
      `${fmt((s.memory[key] - idle.memory[key]) / devices / 1024, 0)} KB`;
    const rssMarginal = halfWindow
      ? `${fmt((full.memory.memory.rss - halfWindow.memory.memory.rss) / (devices - half) / 1024, 0)} KB`
      : '–';
    const b = full.end;
    const found = b.utterances - full.start.utterances;
    const dropped = b.droppedAudio - full.start.droppedAudio;
    // A server that falls behind real time scores less audio than it is sent, so its CPU per device
    // undercounts; the per-core figure is then no capacity at all. The devices stream in step, so the
    // window may hold one utterance per device fewer than the estimate without anything being late.
    const behind = dropped > 0 || found < expectedUtterances - devices;
    const perCore = behind ? 'not measured (server behind real time)' : 1 / perDevice >= 200 ? 'ok' : 'MISS';
    printPairs([
      ['server CPU, connected but silent', `${fmt(100 * idleCpu)} % of a core`],
      [
        `server CPU, ${half} streaming`,
        halfWindow ? `${fmt(100 * halfWindow.serverFraction)} % of a core` : '–',
      ],
      [`server CPU, ${devices} streaming`, `${fmt(100 * full.serverFraction)} % of a core`],
      [
        'CPU per streaming device (all / N)',
        `${fmt(perDevice * 1000, 2)} ms/s (${fmt(100 * perDevice, 3)} % of a core)`,
      ],
      ['CPU per added device (marginal)', `${fmt(marginal * 1000, 2)} ms/s`],
      [
        'streaming devices per core',
        `${fmt(1 / perDevice, 0)} (target ≥ 200: ${perCore}); marginal ${behind ? '–' : fmt(1 / marginal, 0)}`,
      ],
      ['robots CPU (this process, all)', `${fmt(100 * full.clientFraction)} % of a core`],
      ['utterances found by the VAD', `${found} (≈${expectedUtterances} expected)`],
      ['uplink packets dropped (VAD backlog)', String(dropped)],
      ['server kept up with real time', behind ? 'NO (VAD backlog: fewer utterances or drops)' : 'yes'],
      [
        'server event-loop lag',
        `p50 ${fmt(b.loopDelay.p50)} / p99 ${fmt(b.loopDelay.p99)} / max ${fmt(b.loopDelay.max)} ms`,
      ],
      [
        'server RSS idle (0 devices)',
        `${fmt(idle.memory.rss / MB)} MB (heap ${fmt(idle.memory.heapUsed / MB)} MB)`,
      ],
      [`server RSS, ${devices} connected`, `${fmt(connected.memory.rss / MB)} MB`],
      [`server RSS, ${devices} streaming`, `${fmt(full.memory.memory.rss / MB)} MB`],
      ['RSS per connection (connected − idle)', perConn(connected, 'rss')],
      ['RSS per connection (streaming − idle)', perConn(full.memory, 'rss')],
      [`RSS per added streaming device`, rssMarginal],
      [
        'JS heap / external per conn (streaming)',
        `${perConn(full.memory, 'heapUsed')} / ${perConn(full.memory, 'external')}`,
      ],
    ]);
  } finally {
    controller.abort();
    await Promise.all(streams);
    stopRobots(robots);
    await server.stop();
  }
}

interface Window {
  start: ServerSample;
  end: ServerSample;
  /** After a gc(), at the end of the window. */
  memory: ServerSample;
  wallMs: number;
  serverFraction: number;
  clientFraction: number;
}

/** Warms up, then measures server and client CPU over `ms` of steady streaming. */
async function measureWindow(server: ServerChild, ms: number): Promise<Window> {
  await delay(WARMUP_MS);
  const start = await server.sample();
  const client = process.cpuUsage();
  const clientStart = performance.now();
  await delay(ms);
  const end = await server.sample();
  const clientFraction = cpuMs(process.cpuUsage(client)) / (performance.now() - clientStart);
  const memory = await server.sample(true);
  const wallMs = end.at - start.at;
  return {
    start,
    end,
    memory,
    wallMs,
    serverFraction: (cpuMs(end.cpu) - cpuMs(start.cpu)) / wallMs,
    clientFraction,
  };
}

/** Server CPU as a fraction of one core over `ms`. */
async function measureCpu(server: ServerChild, ms: number): Promise<number> {
  const a = await server.sample();
  await delay(ms);
  const b = await server.sample();
  return (cpuMs(b.cpu) - cpuMs(a.cpu)) / (b.at - a.at);
}
