// ASR queue: the real PocketsphinxAsr (pool + recognition queue) called directly — not through the
// WebSocket — on espeak-ng questions that went through Opus as a robot sends them. Prints: what a decoder
// costs to load, a live recognition's latency alone vs behind six cancelled jobs, and the stt latency
// (utterance handed over → text) when many devices speak at once, for one decoder and for the default pool.
import { loadavg } from 'node:os';
import { OpusPacketDecoder } from '../src/audio/opus.js';
import { PocketsphinxAsr } from '../src/providers/asr/pocketsphinx.js';
import { RECOGNITION_QUEUE_DEFAULTS } from '../src/providers/asr/recognition-queue.js';
import { createDecoder, loadDecoder } from '../src/providers/native/pocketsphinx-lib.js';
import { phraseTable } from '../src/robot/phrases.js';
import { buildUtterance } from './audio.js';
import { fmt, heading, MB, printPairs, printTable, summarize, summaryRow } from './stats.js';

export interface AsrQueueOptions {
  /** Devices speaking at once in the burst run. */
  speakers: number;
  /** Measured recognitions per case in the cancelled-jobs run. */
  rounds: number;
  dataDir: string;
}

const QUESTIONS = [
  'what is the weather like today',
  'tell me a story',
  'how are you today',
  'what can you do',
  'how old are you',
  'do you like music',
  'what time is it',
  'where do you live',
  'what is your favorite color',
  'can you tell me a joke',
  'who made you',
  'what day is it today',
  'do you have any friends',
  'what should i eat for dinner',
  'how far away is the moon',
  'can you sing a song',
  'what is the capital of france',
  'why is the sky blue',
  'do you like dogs',
  'what are you doing',
];
/** The server's VAD ends an utterance after this much silence (VAD.silero.min_silence_duration_ms). */
const TRAILING_SILENCE_MS = 700;
const CANCELLED_AHEAD = 6;
const BURSTS = 2;

const loadAverage = () =>
  loadavg()
    .map((load) => load.toFixed(2))
    .join(' ');

export async function runAsrQueue(options: AsrQueueOptions): Promise<void> {
  heading('ASR queue (pocketsphinx provider called directly; espeak-ng questions through Opus)');
  console.log(`  load average at start: ${loadAverage()} (other work on the machine makes timings noisy)`);
  const questions = Array.from({ length: options.speakers }, (_, i) => QUESTIONS[i % QUESTIONS.length]!);
  const heard = new Map<string, Int16Array>();
  for (const text of new Set(questions)) heard.set(text, await serverPcm(text, options.dataDir));

  await decoderCost();
  const commands = phraseTable('Pip').flatMap((row) => row.phrases);
  const pool = new PocketsphinxAsr({ commands });
  const single = new PocketsphinxAsr({ commands, queue: { workers: 1 } });
  try {
    await cancelledAhead(pool, heard.get(QUESTIONS[0]!)!, options.rounds);
    console.log(
      `\n  ${options.speakers} devices speak at once (each a different question where there are enough), ` +
        `${BURSTS} bursts per pool size, alternating`,
    );
    const results = new Map<PocketsphinxAsr, BurstResult[]>([
      [single, []],
      [pool, []],
    ]);
    for (let round = 0; round < BURSTS; round++) {
      for (const [asr, list] of results) list.push(await burst(asr, questions, heard));
    }
    const rows = [
      [
        'decoders',
        'p50 ms',
        'p99 ms',
        'max ms',
        'mean ms',
        'n',
        'wall s / cpu s per burst; exact texts; refused',
      ],
    ];
    for (const [asr, list] of results) {
      const note =
        `${list.map((r) => `${fmt(r.wallSec, 1)} / ${fmt(r.cpuSec, 1)}`).join(', ')}; ` +
        `${sum(list.map((r) => r.exact))}/${sum(list.map((r) => r.latencies.length + r.refused))}; ` +
        `${sum(list.map((r) => r.refused))}`;
      rows.push(
        summaryRow(
          String(asr.queueStats().workers),
          list.flatMap((r) => r.latencies),
          note,
          0,
        ),
      );
    }
    printTable(rows);
  } finally {
    single.close();
    pool.close();
  }
  console.log(`  load average at end: ${loadAverage()}`);
}

/** What the server's recogniser gets: the question plus the VAD's closing silence, Opus-coded and decoded. */
async function serverPcm(text: string, dataDir: string): Promise<Int16Array> {
  const utterance = await buildUtterance(text, TRAILING_SILENCE_MS, dataDir);
  const decoder = new OpusPacketDecoder(16_000);
  const frames = utterance.packets.map((packet) => decoder.decode(packet) ?? new Int16Array(0));
  const pcm = new Int16Array(frames.reduce((n, frame) => n + frame.length, 0));
  let offset = 0;
  for (const frame of frames) {
    pcm.set(frame, offset);
    offset += frame.length;
  }
  return pcm;
}

/** A decoder's model load: on the event loop (the pool's first) and on a worker thread (the others). */
async function decoderCost(): Promise<void> {
  const rssBefore = process.memoryUsage().rss;
  let start = performance.now();
  const first = createDecoder();
  const syncMs = performance.now() - start;
  const rssFirst = process.memoryUsage().rss;
  let lastTick = performance.now();
  let worstGapMs = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    worstGapMs = Math.max(worstGapMs, now - lastTick);
    lastTick = now;
  }, 5);
  start = performance.now();
  const second = await loadDecoder();
  const asyncMs = performance.now() - start;
  clearInterval(ticker);
  const rssSecond = process.memoryUsage().rss;
  await Promise.all([first.free(), second.free()]);
  console.log('\n  decoder load (one pocketsphinx en-us model)');
  printPairs([
    [
      'on the event loop (the first)',
      `${fmt(syncMs, 0)} ms, blocking; RSS +${fmt((rssFirst - rssBefore) / MB, 0)} MB`,
    ],
    [
      'on a worker thread (the others)',
      `${fmt(asyncMs, 0)} ms; longest event-loop gap meanwhile ${fmt(worstGapMs, 0)} ms; ` +
        `RSS +${fmt((rssSecond - rssFirst) / MB, 0)} MB`,
    ],
    ['default pool size here', `${RECOGNITION_QUEUE_DEFAULTS.workers} decoders (loaded on first need)`],
  ]);
}

/** One live recognition, alone and with CANCELLED_AHEAD already-cancelled jobs submitted just before it. */
async function cancelledAhead(asr: PocketsphinxAsr, pcm: Int16Array, rounds: number): Promise<void> {
  const timings = { alone: [] as number[], behind: [] as number[] };
  await asr.transcribe(pcm, new AbortController().signal); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const kind of ['alone', 'behind'] as const) {
      const start = performance.now();
      if (kind === 'behind') {
        for (let i = 0; i < CANCELLED_AHEAD; i++)
          asr.transcribe(pcm, AbortSignal.abort(), { deviceId: `stale-${i}` }).catch(() => undefined);
      }
      await asr.transcribe(pcm, new AbortController().signal, { deviceId: 'live' });
      timings[kind].push(performance.now() - start);
    }
  }
  const ratio = summarize(timings.behind).p50 / summarize(timings.alone).p50;
  console.log(`\n  one live recognition of "${QUESTIONS[0]}" (${fmt(pcm.length / 16, 0)} ms of audio)`);
  printTable([
    ['case', 'p50 ms', 'p99 ms', 'max ms', 'mean ms', 'n', 'note'],
    summaryRow('alone', timings.alone),
    summaryRow(
      `${CANCELLED_AHEAD} cancelled ahead`,
      timings.behind,
      `p50 ${fmt((ratio - 1) * 100, 0)} % vs alone; queue totals: started ${asr.queueStats().started}, cancelled ${asr.queueStats().cancelled}`,
    ),
  ]);
}

interface BurstResult {
  latencies: number[];
  wallSec: number;
  /** CPU time of the whole process (all threads) during the burst: wall time minus it is time waited for a core. */
  cpuSec: number;
  exact: number;
  refused: number;
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

/** Every device hands over its utterance at the same moment; each latency runs to its own text. */
async function burst(
  asr: PocketsphinxAsr,
  questions: string[],
  heard: Map<string, Int16Array>,
): Promise<BurstResult> {
  const { workers } = asr.queueStats();
  // Load the whole pool first: the one-time model loads are reported above, not here.
  await Promise.all(
    Array.from({ length: workers }, (_, i) =>
      asr.transcribe(heard.get(questions[0]!)!, new AbortController().signal, { deviceId: `warm-${i}` }),
    ),
  );
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  const result: BurstResult = { latencies: [], wallSec: 0, cpuSec: 0, exact: 0, refused: 0 };
  await Promise.all(
    questions.map(async (text, i) => {
      try {
        const heardText = await asr.transcribe(heard.get(text)!, new AbortController().signal, {
          deviceId: `dev-${i}`,
        });
        result.latencies.push(performance.now() - start);
        if (heardText === text) result.exact++;
      } catch {
        result.refused++;
      }
    }),
  );
  result.wallSec = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  result.cpuSec = (cpu.user + cpu.system) / 1e6;
  return result;
}
