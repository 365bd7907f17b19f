// Latency: N robots each do T turns against the voice server (child process) with fixed-latency providers.
// Server-added latency = end of utterance → first downlink frame, minus the providers' time.
import { setTimeout as delay } from 'node:timers/promises';
import type { VirtualRobot } from '../src/device/robot.js';
import { DEFAULT_TAIL_SILENCE_MS } from '../src/voice/speech-out.js';
import type { Utterance } from './audio.js';
import { type ClientTurn, doTurn, jitterOf, scaledMs, startRobots, stopRobots, waitUntil } from './fleet.js';
import { ServerChild, type TurnFigures } from './ipc.js';
import { type BenchLatencies, nominalProviderMs } from './providers.js';
import { fmt, heading, printPairs, printTable, summarize, summaryRow } from './stats.js';

export interface LatencyOptions {
  devices: number;
  turns: number;
  latencies: BenchLatencies;
  utterance: Utterance;
}

export async function runLatency(options: LatencyOptions): Promise<void> {
  const { devices, turns, latencies, utterance } = options;
  heading(`Latency: ${devices} devices × ${turns} turns (server in a child process)`);
  const server = await ServerChild.start(latencies);
  const bootStart = performance.now();
  let robots: VirtualRobot[] = [];
  try {
    robots = await startRobots(server.otaUrl, devices);
    const attached = await waitUntil(
      async () => (await server.sample()).attached >= devices,
      scaledMs(10_000, devices, 50),
    );
    console.log(
      `  ${devices} robots booted and connected in ${fmt((performance.now() - bootStart) / 1000)} s` +
        (attached ? '' : ' (not all conversations attached!)'),
    );
    const before = await server.sample();
    const clientCpu = process.cpuUsage();
    const started = performance.now();
    // Spread first turns over one whole turn period, so turns do not all line up.
    const periodMs = utterance.totalMs + latencies.ttsSeconds * 1000 + 600;
    const client: ClientTurn[] = [];
    await Promise.all(
      robots.map(async (robot) => {
        await delay(Math.random() * periodMs);
        for (let t = 0; t < turns; t++) {
          if (!robot.connected) break;
          // A saturated server falls behind on every device at once; its turns are slow, not lost.
          const turn = await doTurn(robot, utterance, scaledMs(15_000, devices, 75));
          client.push(turn);
          // Its late reply would pass for the next turn's: this robot is done.
          if (!turn.ok) break;
          await delay(100 + Math.random() * 400);
        }
      }),
    );
    const wallMs = performance.now() - started;
    const clientCpuMs = cpuMs(process.cpuUsage(clientCpu));
    const after = await server.sample();
    report(options, client, await server.turns(), {
      wallMs,
      clientCpuMs,
      serverCpuMs: cpuMs(after.cpu) - cpuMs(before.cpu),
      serverWallMs: after.at - before.at,
      droppedAudio: after.droppedAudio - before.droppedAudio,
      droppedAudioOut: after.droppedAudioOut - before.droppedAudioOut,
      loop: after.loopDelay,
    });
  } finally {
    stopRobots(robots);
    await server.stop();
  }
}

interface PhaseTotals {
  wallMs: number;
  clientCpuMs: number;
  serverCpuMs: number;
  serverWallMs: number;
  droppedAudio: number;
  droppedAudioOut: number;
  loop: { p50: number; p99: number; max: number };
}

function report(
  options: LatencyOptions,
  client: ClientTurn[],
  server: TurnFigures[],
  totals: PhaseTotals,
): void {
  const { latencies: l, utterance } = options;
  const nominal = nominalProviderMs(l);
  const full = server.filter(
    (t) =>
      !t.aborted &&
      t.totalMs !== undefined &&
      t.asrMs !== undefined &&
      t.modelMs !== undefined &&
      t.ttsFirstChunkMs !== undefined,
  );
  const pick = (f: (t: TurnFigures) => number | undefined) => full.map(f).filter((v) => v !== undefined);
  const added = pick((t) => t.totalMs! - t.asrMs! - t.modelMs! - t.ttsFirstChunkMs!);
  const addedNominal = pick((t) => t.totalMs! - nominal);
  const deviceView = client
    .filter((c) => c.ok && c.endPacketSentAt !== undefined && c.audioAt.length > 0)
    .map((c) => c.audioAt[0]! - c.endPacketSentAt! - nominal);
  const jitters = client.filter((c) => c.ok).map((c) => jitterOf(c.audioAt));
  const deviations = jitters.flatMap((j) => j.deviations);
  const maxAhead = jitters.map((j) => j.maxAhead);

  console.log(
    `  utterance "${utterance.text}": ${fmt(utterance.speechMs, 0)} ms speech + silence = ` +
      `${utterance.packets.length} packets; offline VAD ends it at packet ${utterance.endPacket} ` +
      `(${fmt((utterance.endPacket + 1) * 60 - utterance.speechMs, 0)} ms after speech ends)`,
  );
  console.log(
    `  providers: ASR ${l.asrMs} ms, LLM first token ${l.llmMs} ms, TTS first chunk ${l.ttsMs} ms ` +
      `(${l.ttsSeconds} s of audio in ${l.ttsChunks} chunks, yielded together)\n`,
  );
  printTable([
    ['per turn (ms)', 'p50', 'p99', 'max', 'mean', 'n', ''],
    summaryRow(
      'end of utterance → first audio',
      pick((t) => t.totalMs),
    ),
    summaryRow(
      '  ASR (provider)',
      pick((t) => t.asrMs),
      `fixed ${l.asrMs}`,
    ),
    summaryRow(
      '  ASR done → reply start',
      pick((t) => t.asrToReplyMs),
    ),
    summaryRow(
      '  reply start → first token',
      pick((t) => t.modelMs),
      `fixed ${l.llmMs}`,
    ),
    summaryRow(
      '  TTS first chunk (provider)',
      pick((t) => t.ttsFirstChunkMs),
      `fixed ${l.ttsMs}`,
    ),
    summaryRow(
      '  token+TTS chunk → 1st frame sent',
      pick((t) => t.ttsToAudioMs),
      'segment, encode, pacer',
    ),
    summaryRow('server-added (− measured provider ms)', added, verdict(added)),
    summaryRow(`server-added (− nominal ${nominal} ms)`, addedNominal, 'incl. timer lateness'),
    summaryRow('device view (end packet sent → 1st audio)', deviceView, `− ${nominal}; +uplink, VAD lag`),
  ]);
  console.log('');
  printTable([
    ['downlink', 'p50', 'p99', 'max', 'mean', 'n', ''],
    summaryRow('|interval − 60 ms| after 5 pre-buffered', deviations, '', 2),
    summaryRow(
      'frames ahead of playout (per reply)',
      maxAhead,
      maxAhead.every((a) => a <= 40) ? '≤ 40 ok' : '> 40!',
    ),
    summaryRow(
      'audio packets per reply',
      jitters.map((j) => j.packets),
      `${Math.ceil((l.ttsSeconds * 1000) / 60) + Math.ceil(DEFAULT_TAIL_SILENCE_MS / 60)} expected (speech + tail silence)`,
      0,
    ),
  ]);
  console.log('');
  const ok = client.filter((c) => c.ok).length;
  printPairs([
    [
      'turns answered',
      `${ok}/${client.length} (server timings for ${full.length}, aborted ${server.length - full.length})`,
    ],
    ['uplink packets dropped (VAD backlog)', String(totals.droppedAudio)],
    ['downlink packets dropped (socket backlog)', String(totals.droppedAudioOut)],
    [
      'server event-loop lag',
      `p50 ${fmt(totals.loop.p50)} / p99 ${fmt(totals.loop.p99)} / max ${fmt(totals.loop.max)} ms`,
    ],
    ['server CPU during the turns', `${fmt((100 * totals.serverCpuMs) / totals.serverWallMs)} % of a core`],
    ['robots CPU (this process)', `${fmt((100 * totals.clientCpuMs) / totals.wallMs)} % of a core`],
    ['phase wall time', `${fmt(totals.wallMs / 1000)} s`],
  ]);
}

function verdict(added: number[]): string {
  const s = summarize(added);
  if (s.n === 0) return '';
  const p50 = s.p50 <= 5 ? 'p50 ≤ 5 ok' : 'p50 > 5 MISS';
  const p99 = s.p99 <= 20 ? 'p99 ≤ 20 ok' : 'p99 > 20 MISS';
  return `target: ${p50}, ${p99}`;
}

export function cpuMs(usage: NodeJS.CpuUsage): number {
  return (usage.user + usage.system) / 1000;
}
