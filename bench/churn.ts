// Churn: N connect → hello → (audio) → disconnect cycles against the voice server in a child process, some in
// flight at once, clean closes and abrupt drops alternating across binary protocol versions 1/2/3. At rest
// (every client gone, the server idle, forced GCs) it samples memory and handles; they must stay flat.
import { setTimeout as delay } from 'node:timers/promises';
import { BINARY_VERSIONS } from '../src/protocol/index.js';
import type { Utterance } from './audio.js';
import { type CycleKind, type CycleOutcome, runCycle } from './churn-client.js';
import { benchMac, waitUntil } from './fleet.js';
import { type ResourceSample, ServerChild } from './ipc.js';
import { type BenchLatencies, seededRandom } from './providers.js';
import { fmt, heading, MB, printPairs, printTable } from './stats.js';

export interface ChurnOptions {
  cycles: number;
  concurrency: number;
  latencies: BenchLatencies;
  utterance: Utterance;
}

const WARMUP_CYCLES = 200;
const SAMPLE_EVERY = 1000;
const CYCLE_TIMEOUT_MS = 10_000;
const KINDS: CycleKind[] = ['hello', 'auto', 'manual'];
/** Thresholds of the verdict: what "flat" tolerates. */
const RSS_MB_PER_1000 = 1;
const HANDLE_SLACK = 2;

interface Checkpoint {
  cycles: number;
  elapsedMs: number;
  settled: boolean;
  r: ResourceSample;
}

interface Tally {
  ok: number;
  timeouts: number;
  errors: Map<string, number>;
  serverClosed: Map<number, number>;
  replies: number;
  aborted: number;
}

export async function runChurn(options: ChurnOptions): Promise<void> {
  const { cycles, concurrency } = options;
  heading(
    `Churn: ${cycles} connect/disconnect cycles, ${concurrency} in flight, protocol v1/v2/v3 ` +
      '(server in a child process)',
  );
  console.log(
    '  each cycle: connect, hello, MCP discovery; then nothing, or listen auto + 8 Opus packets + stop, or\n' +
      '  listen manual + 8 packets + stop and 0–400 ms of recognition/reply; then Close frame or TCP drop.\n' +
      '  Samples are taken at rest (no client left, server registry empty) after forced GCs.\n',
  );
  const server = await ServerChild.start(options.latencies);
  const url = `ws://127.0.0.1:${server.wsPort}/device/v1/`;
  const packets = options.utterance.packets.slice(0, 8);
  const random = seededRandom(5);
  const tally: Tally = {
    ok: 0,
    timeouts: 0,
    errors: new Map(),
    serverClosed: new Map(),
    replies: 0,
    aborted: 0,
  };
  const checkpoints: Checkpoint[] = [];
  const began = performance.now();
  const socketsBefore = clientSockets();
  let next = 0;
  /** Time spent cycling after the warm-up, without the pauses at checkpoints. */
  let cyclingMs = 0;

  const runUntil = async (target: number) => {
    // Each worker is one device (fixed Device-Id) reconnecting, as a real one does after a drop: a new
    // connection may reach the server before it has seen the old one go.
    const worker = async (w: number) => {
      const deviceId = benchMac(0xc000 + w);
      const clientId = `churn-${w}`;
      while (next < target) {
        const i = next++;
        const kind = KINDS[Math.floor(i / 6) % KINDS.length]!;
        count(
          tally,
          await runCycle({
            url,
            deviceId,
            clientId,
            version: BINARY_VERSIONS[i % 3]!,
            abrupt: Math.floor(i / 3) % 2 === 1,
            kind,
            packets,
            lingerMs: kind === 'manual' ? Math.floor(random() * 400) : 0,
            timeoutMs: CYCLE_TIMEOUT_MS,
          }),
        );
      }
    };
    await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  };

  const checkpoint = async () => {
    const settled = await waitUntil(async () => {
      const s = await server.sample();
      return s.sessions === 0 && s.attached === 0 && clientSockets() <= socketsBefore;
    }, 15_000);
    // At rest also means no timer still holds a session: one replaced by its device's reconnection (which
    // can overtake the old connection's drop) keeps itself 2 s for its terminate timer (DeviceSession.close).
    await delay(2500);
    for (const turn of await server.turns()) {
      tally.replies++;
      if (turn.aborted) tally.aborted++;
    }
    checkpoints.push({
      cycles: next,
      elapsedMs: performance.now() - began,
      settled,
      r: await server.resources(),
    });
  };

  try {
    await runUntil(Math.min(WARMUP_CYCLES, cycles));
    await checkpoint();
    while (next < cycles) {
      const start = performance.now();
      await runUntil(Math.min(cycles, (Math.floor(next / SAMPLE_EVERY) + 1) * SAMPLE_EVERY));
      cyclingMs += performance.now() - start;
      await checkpoint();
    }
  } finally {
    await server.stop();
  }
  report(options, checkpoints, tally, cyclingMs);
}

function count(tally: Tally, outcome: CycleOutcome): void {
  if (outcome.ok) {
    tally.ok++;
    if (outcome.serverClosed !== undefined)
      tally.serverClosed.set(outcome.serverClosed, (tally.serverClosed.get(outcome.serverClosed) ?? 0) + 1);
    return;
  }
  if (outcome.timeout) tally.timeouts++;
  const key = `${outcome.stage}: ${outcome.error}`;
  tally.errors.set(key, (tally.errors.get(key) ?? 0) + 1);
}

/** TCP sockets this (client) process still has open: the clients must be gone before a sample. */
function clientSockets(): number {
  return process.getActiveResourcesInfo().filter((type) => type === 'TCPSocketWrap').length;
}

const total = (handles: Record<string, number>) => Object.values(handles).reduce((a, b) => a + b, 0);

function report(options: ChurnOptions, checkpoints: Checkpoint[], tally: Tally, cyclingMs: number): void {
  const first = checkpoints[0];
  const last = checkpoints[checkpoints.length - 1];
  if (!first || !last) return;
  printTable([
    [
      'cycles',
      's',
      'RSS MB',
      'heap MB',
      'ext MB',
      'handles',
      'sockets',
      'timers',
      'fds',
      'registry',
      'live sess',
      'live conv',
      '',
    ],
    ...checkpoints.map((c) => [
      String(c.cycles),
      fmt(c.elapsedMs / 1000),
      fmt(c.r.memory.rss / MB),
      fmt(c.r.memory.heapUsed / MB),
      fmt(c.r.memory.external / MB),
      String(total(c.r.handles)),
      String(c.r.handles.TCPSocketWrap ?? 0),
      String(c.r.handles.Timeout ?? 0),
      String(c.r.fds),
      String(c.r.registry),
      String(c.r.liveSessions),
      String(c.r.liveConversations),
      c.settled ? '' : 'not at rest after 15 s',
    ]),
  ]);
  const types = [...new Set([...Object.keys(first.r.handles), ...Object.keys(last.r.handles)])].sort();
  const byType = (r: ResourceSample) => types.map((t) => `${t} ${r.handles[t] ?? 0}`).join(', ');

  // Two points make a line out of any noise: a growth figure needs three samples in the second half.
  const secondHalf = checkpoints.filter((c) => c.cycles >= options.cycles / 2);
  if (secondHalf.length < 3) secondHalf.length = 0;
  const rssSlope = slope(secondHalf.map((c) => [c.cycles / 1000, c.r.memory.rss / MB]));
  const heapSlope = slope(secondHalf.map((c) => [c.cycles / 1000, c.r.memory.heapUsed / MB]));
  const errors = [...tally.errors.values()].reduce((a, b) => a + b, 0);
  const closes = [...tally.serverClosed].map(([code, n]) => `${code} × ${n}`).join(', ') || 'none';
  console.log('');
  printPairs([
    ['cycles ok / failed', `${tally.ok} / ${errors} (timeouts ${tally.timeouts})`],
    ...[...tally.errors].map(([what, n]): [string, string] => [`  ${what}`, String(n)]),
    ['rate after warm-up', `${fmt(((last.cycles - first.cycles) * 1000) / cyclingMs, 0)} cycles/s`],
    ['server sessions created', `${last.r.sessionsCreated} (cycles that got a hello: ${tally.ok})`],
    ['replies started / cut by the drop', `${tally.replies} / ${tally.aborted}`],
    ['closed by the server mid-cycle', closes],
    ['handles at start', `${total(first.r.handles)} (${byType(first.r)})`],
    ['handles at end', `${total(last.r.handles)} (${byType(last.r)})`],
    [
      'RSS growth, second half',
      Number.isNaN(rssSlope)
        ? 'not measured (needs --cycles ≥ 4000)'
        : `${fmt(rssSlope, 2)} MB per 1000 cycles (heap ${fmt(heapSlope, 2)} MB)`,
    ],
    ['RSS start → end', `${fmt(first.r.memory.rss / MB)} → ${fmt(last.r.memory.rss / MB)} MB`],
  ]);

  const problems: string[] = [];
  if (total(last.r.handles) > total(first.r.handles) + HANDLE_SLACK)
    problems.push(`handles ${total(first.r.handles)} → ${total(last.r.handles)}`);
  if (last.r.fds > first.r.fds + HANDLE_SLACK) problems.push(`fds ${first.r.fds} → ${last.r.fds}`);
  if (rssSlope > RSS_MB_PER_1000) problems.push(`RSS +${fmt(rssSlope, 2)} MB/1000 cycles`);
  if (last.r.registry !== 0) problems.push(`registry ${last.r.registry} at end`);
  if (last.r.liveSessions > first.r.liveSessions + HANDLE_SLACK)
    problems.push(`sessions not collected ${first.r.liveSessions} → ${last.r.liveSessions}`);
  if (!last.settled) problems.push('server not at rest at the end');
  const verdict = problems.length === 0 ? 'flat' : `NOT FLAT (${problems.join('; ')})`;
  console.log(
    `\n  verdict: ${verdict} — RSS ${fmt(rssSlope, 2)} MB/1000 cycles (limit ${RSS_MB_PER_1000}), ` +
      `handles ${total(first.r.handles)} → ${total(last.r.handles)}, registry at end ${last.r.registry}, ` +
      `errors ${errors}, timeouts ${tally.timeouts}`,
  );
}

/** Least-squares slope of y over x; NaN with fewer than two points. */
function slope(points: Array<[number, number]>): number {
  if (points.length < 2) return Number.NaN;
  const mx = points.reduce((s, [x]) => s + x, 0) / points.length;
  const my = points.reduce((s, [, y]) => s + y, 0) / points.length;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}
