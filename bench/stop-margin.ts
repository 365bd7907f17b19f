import { cpus, loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { parseConfig } from '../src/config/index.js';
import type { VirtualRobot } from '../src/device/robot.js';
import { DEFAULT_STALL_MARGIN_MS, DEFAULT_TAIL_SILENCE_MS } from '../src/voice/speech-out.js';
import type { Utterance } from './audio.js';
import { scaledMs, startRobots, stopRobots, streamPackets, waitUntil } from './fleet.js';
import { FlushClient, type HeardReply, playLikeTestPage, type ReplyOutcome } from './flush-client.js';
import { ServerChild } from './ipc.js';
import { cpuMs } from './latency.js';
import type { BenchLatencies } from './providers.js';
import { fmt, heading, printPairs, printTable, summarize } from './stats.js';

export interface StopMarginOptions {
  /** Page-like clients asking at once. */
  clients: number;
  /** Replies each client asks for. */
  turns: number;
  /** Stop margins to evaluate (ms); the server's configured one is measured, the others are moved stops. */
  marginsMs: number[];
  /** Worker threads spinning in this process while the clients talk (the CPU load). */
  loadThreads: number;
  /** Percent of each 100 ms a load thread spins (100 = never sleeps). */
  loadDutyPercent: number;
  /** Virtual robots streaming `utterance` (uplink Opus through the server's VAD) as server-side load. */
  streamers: number;
  latencies: BenchLatencies;
  /** Needed only with streamers. */
  utterance?: Utterance;
  /** What the clients ask (the bench LLM answers the same whatever it is). */
  question?: string;
}

export const STOP_MARGIN_DEFAULTS = {
  clients: 30,
  turns: 6,
  marginsMs: [0, 200, 400, 600, 800],
  loadThreads: cpus().length,
  loadDutyPercent: 100,
  streamers: 0,
} as const;

export async function runStopMargin(options: StopMarginOptions): Promise<void> {
  const { clients, turns, marginsMs, streamers, latencies } = options;
  // The server child runs on the configuration defaults (unset stall and tail keys: SpeechOut's defaults).
  const voice = parseConfig({}).voice;
  const serverMarginMs = voice.tts_stop_margin_ms;
  const stallMs = voice.tts_stop_stall_margin_ms ?? DEFAULT_STALL_MARGIN_MS;
  const tailMs = voice.tts_tail_silence_ms ?? DEFAULT_TAIL_SILENCE_MS;
  heading(`Stop margin: ${clients} page-like clients × ${turns} replies, flushing their audio on tts stop`);
  console.log(
    `  server: stop margin ${serverMarginMs} ms, stall margin ${stallMs} ms + late frames, ` +
      `tail silence ${tailMs} ms; TTS ${latencies.ttsSeconds} s per reply\n` +
      `  load: ${options.loadThreads} worker threads spinning ${options.loadDutyPercent} % of the time` +
      `${streamers ? `, ${streamers} robots streaming speech` : ''}, on ${cpus().length} cores\n`,
  );
  if (streamers > 0 && !options.utterance) throw new Error('stop-margin: streamers need an utterance');
  const maxMoveMs = Math.max(0, ...marginsMs.map((m) => m - serverMarginMs));
  const server = await ServerChild.start(latencies);
  let robots: VirtualRobot[] = [];
  const load = startCpuLoad(options.loadThreads, options.loadDutyPercent);
  const streaming = new AbortController();
  const streams: Promise<void>[] = [];
  try {
    robots = await startRobots(server.otaUrl, clients + streamers);
    const attached = await waitUntil(
      async () => (await server.sample()).attached >= robots.length,
      scaledMs(10_000, robots.length, 50),
    );
    if (!attached) console.log('  warning: not all conversations attached');
    for (const robot of robots.slice(clients)) {
      robot.listen('start', 'auto');
      streams.push(streamForever(robot, options.utterance!, streaming.signal));
    }
    const loadBefore = loadavg()[0]!;
    const before = await server.sample();
    const clientLoop = monitorEventLoopDelay({ resolution: 5 });
    clientLoop.enable();
    const started = performance.now();
    const flushClients = robots.slice(0, clients).map((robot) => new FlushClient(robot));
    let unanswered = 0;
    await Promise.all(
      flushClients.map(async (client) => {
        await delay(Math.random() * 2000); // spread the first questions over a reply or so
        for (let t = 0; t < turns && client.robot.connected; t++) {
          const reply = await client.ask(options.question ?? 'What is the weather like today?', 20_000);
          if (!reply) {
            unanswered++;
            break; // its late reply would pass for the next one
          }
          // Longer than the largest stop move, so no moved stop reaches into the next reply.
          await delay(maxMoveMs + 300 + Math.random() * 300);
        }
      }),
    );
    clientLoop.disable();
    const wallMs = performance.now() - started;
    const after = await server.sample();
    const sessions = flushClients.map((c) => c.replies);
    printPairs([
      ['replies heard', `${sessions.reduce((n, s) => n + s.length, 0)} (${unanswered} clients got no reply)`],
      ['phase wall time', `${fmt(wallMs / 1000)} s`],
      ['load average (1 min) before / after', `${fmt(loadBefore, 2)} / ${fmt(loadavg()[0]!, 2)}`],
      [
        'server CPU during the phase',
        `${fmt((100 * (cpuMs(after.cpu) - cpuMs(before.cpu))) / (after.at - before.at))} % of a core`,
      ],
      [
        'server event-loop lag',
        `p50 ${fmt(after.loopDelay.p50)} / p99 ${fmt(after.loopDelay.p99)} / max ${fmt(after.loopDelay.max)} ms`,
      ],
      [
        'clients event-loop lag',
        `p50 ${fmt(lagMs(clientLoop.percentile(50)))} / p99 ${fmt(lagMs(clientLoop.percentile(99)))} / ` +
          `max ${fmt(lagMs(clientLoop.max))} ms`,
      ],
    ]);
    console.log('');
    report(sessions, marginsMs, serverMarginMs);
  } finally {
    streaming.abort();
    await Promise.all(streams);
    await load.stop();
    stopRobots(robots);
    await server.stop();
  }
}

/** The histogram holds timer intervals (resolution + lag), in ns. */
const lagMs = (ns: number) => Math.max(0, ns / 1e6 - 5);

function report(sessions: HeardReply[][], marginsMs: number[], serverMs: number): void {
  const rows: string[][] = [
    [
      'margin',
      'replies',
      'with loss',
      'lost ms p50/p99/max',
      'never scheduled',
      'cut by stop',
      'stop − page speech end',
      'stop − firmware speech end',
    ],
  ];
  let overlaps = 0;
  let atServerMargin: ReplyOutcome[] = [];
  for (const marginMs of marginsMs) {
    const outcomes: ReplyOutcome[] = [];
    for (const replies of sessions) {
      const played = playLikeTestPage(replies, marginMs - serverMs);
      played.forEach((o, i) => {
        const next = replies[i + 1]?.frames[0];
        if (next && o.stopAtMs >= next.atMs) overlaps++;
      });
      outcomes.push(...played);
    }
    if (marginMs === serverMs) atServerMargin = outcomes;
    const lossy = outcomes.filter((o) => o.lostMs > 0.5);
    const total = (pick: (o: ReplyOutcome) => number) => `${fmt(sum(outcomes.map(pick)), 0)} ms`;
    rows.push([
      marginMs === serverMs ? `${marginMs} ms (server)` : `${marginMs} ms (${signed(marginMs - serverMs)})`,
      String(outcomes.length),
      `${lossy.length} (${fmt((100 * lossy.length) / Math.max(1, outcomes.length))} %)`,
      triple(lossy.map((o) => o.lostMs)),
      total((o) => o.lostUnscheduledMs),
      total((o) => o.lostCutMs),
      triple(outcomes.filter((o) => o.lostMs <= 0.5).map((o) => o.stopAtMs - o.speechEndAtMs)),
      triple(outcomes.map((o) => o.stopAtMs - o.arrivalSpeechEndAtMs)),
    ]);
  }
  printTable(rows);
  console.log(
    "\n  margin: the server's, or what it would have been with every tts stop moved by (margin − server's)." +
      '\n  ms, p50/p99/max. lost: over replies with loss; never scheduled: speech still queued in the page (it' +
      '\n  schedules only while it holds 240 ms) when tts stop flushed it; cut by stop: in the last scheduled' +
      '\n  chunk. stop − page speech end: over replies without loss. stop − firmware speech end: how long a' +
      '\n  device that plays frames as they come waits after the speech for tts stop (auto mode: its mic).',
  );
  const lag = atServerMargin
    .filter((o) => o.lostMs <= 0.5)
    .map((o) => o.speechEndAtMs - o.arrivalSpeechEndAtMs);
  if (lag.length) console.log(`  the page ends the speech later than the firmware by ${triple(lag)} ms`);
  const headroom = sessions.flatMap((replies) => replies.map((_, i) => stopHeadroomMs(replies, i)));
  const h = summarize(headroom);
  const p1 = [...headroom].sort((a, b) => a - b)[Math.floor(headroom.length / 100)];
  console.log(
    `  headroom: each reply's tts stop could have come earlier (not before its last frame), before the ` +
      `page lost speech, by min ` +
      `${fmt(Math.min(...headroom), 0)} / p1 ${fmt(p1 ?? Number.NaN, 0)} / p50 ${fmt(h.p50, 0)} ms`,
  );
  if (overlaps > 0) console.log(`  warning: ${overlaps} moved stops fell into the next reply`);
}

/**
 * How much earlier reply `index`'s `tts stop` could have come (the others unmoved) before the page lost speech,
 * in `stepMs` steps; no earlier than its last frame (the server sends the stop only after that). Negative: how
 * much later it had to come. A stop before the audio would clear nothing, so loss is not monotonic: scan.
 */
function stopHeadroomMs(replies: HeardReply[], index: number, stepMs = 5): number {
  const reply = replies[index]!;
  const loses = (moveMs: number) =>
    playLikeTestPage(replies, (i) => (i === index ? moveMs : 0))[index]!.lostMs > 0.5;
  const earliestMs = (reply.frames.at(-1)?.atMs ?? reply.stopAtMs) - reply.stopAtMs;
  if (loses(0)) {
    let later = stepMs;
    while (later < 2000 && loses(later)) later += stepMs; // −2000: no stop within 2 s saves it
    return -later;
  }
  let earlier = 0;
  while (earlier - stepMs >= earliestMs && !loses(earlier - stepMs)) earlier -= stepMs;
  return -earlier;
}

const signed = (ms: number) => (ms > 0 ? `+${ms}` : String(ms));
const sum = (values: number[]) => values.reduce((s, v) => s + v, 0);

function triple(values: number[]): string {
  const s = summarize(values);
  return s.n === 0 ? '–' : `${fmt(s.p50, 0)}/${fmt(s.p99, 0)}/${fmt(s.max, 0)}`;
}

async function streamForever(robot: VirtualRobot, utterance: Utterance, signal: AbortSignal): Promise<void> {
  let startAtMs = performance.now() + Math.random() * 60;
  while (!signal.aborted && robot.connected) {
    await streamPackets(robot, utterance.packets, startAtMs, signal);
    startAtMs += utterance.packets.length * 60;
  }
}

// Busy loops in worker threads: `dutyPercent` of every 100 ms spinning, the rest asleep.
const SPINNER = `
const { workerData } = require('node:worker_threads');
const nap = new Int32Array(new SharedArrayBuffer(4));
for (;;) {
  const until = Date.now() + workerData.busyMs;
  while (Date.now() < until) {}
  if (workerData.idleMs > 0) Atomics.wait(nap, 0, 0, workerData.idleMs);
}`;

function startCpuLoad(threads: number, dutyPercent: number): { stop: () => Promise<void> } {
  const busyMs = Math.max(0, Math.min(100, dutyPercent));
  const workers = Array.from(
    { length: threads },
    () => new Worker(SPINNER, { eval: true, workerData: { busyMs, idleMs: 100 - busyMs } }),
  );
  return { stop: async () => void (await Promise.all(workers.map((w) => w.terminate()))) };
}
