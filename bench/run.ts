// `npm run bench`: the voice server's performance figures, printed as tables. Never asserts; exits 0
// unless something crashed.
//
//   node dist/bench/run.js [--devices 50] [--turns 3] [--duration 20] [--audio 10] [--cycles 10000]
//                          [--only latency|streaming|capacity|churn|asr[,…]] [--asr-ms 50] [--llm-ms 100]
//                          [--tts-ms 20] [--tts-chunks 3] [--text "…"] [--speakers 20] [--asr-rounds 10]
//                          [--sockets 1000] [--nofile 1024]   (with --only sockets)
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runAsrQueue } from './asr-queue.js';
import { buildUtterance } from './audio.js';
import { runCapacity } from './capacity.js';
import { runChurn } from './churn.js';
import { runLatency } from './latency.js';
import { checkOpenFiles } from './limits.js';
import { type BenchLatencies, DEFAULT_LATENCIES } from './providers.js';
import { runSockets } from './sockets.js';
import { runStopMargin, STOP_MARGIN_DEFAULTS } from './stop-margin.js';
import { runStreaming } from './streaming.js';

const SECTIONS = ['latency', 'streaming', 'capacity', 'churn', 'asr', 'stop-margin', 'sockets'] as const;
type Section = (typeof SECTIONS)[number];
// Churn is opt-in: 10,000 cycles took 2–4 minutes on a busy 2-core machine, longer than the rest together.
// asr is opt-in: it runs the real recogniser (every core busy for a while), the others use bench providers.
// stop-margin is opt-in: it loads every core on purpose.
// sockets is opt-in: floods of hostile connections against the shipped limits, ~2 minutes.
const DEFAULT_SECTIONS: Section[] = ['latency', 'streaming', 'capacity'];

const USAGE = `usage: node dist/bench/run.js [options]
  --devices N     virtual robots / streams (default 50)
  --turns N       turns per robot in the latency run (default 3)
  --duration S    seconds of measured streaming in the streaming run (default 20)
  --audio S       seconds of audio per stream in the capacity run (default 10)
  --cycles N      connect/disconnect cycles in the churn run (default 10000)
  --concurrency N churn cycles in flight at once (default 20)
  --only LIST     latency, streaming, capacity, churn, asr, stop-margin and/or sockets (comma-separated);
                  default: the first three.
                  churn is opt-in (--only churn): connect/disconnect cycles, memory and handles at rest
                  asr is opt-in (--only asr): the real pocketsphinx recogniser behind its queue
                  stop-margin is opt-in (--only stop-margin): page-like clients that flush on tts stop, under
                  CPU load; clients and replies each from --devices and --turns
                  sockets is opt-in (--only sockets): idle, no-hello, slowloris and trickling connections
                  against the default limits, the server held to --nofile descriptors; a fresh client timed
  --sockets N     hostile connections per flood in the sockets run (default 1000)
  --nofile N      descriptor limit of the server process in the sockets run (default 1024)
  --margins LIST  stop margins replayed in the stop-margin run (default ${STOP_MARGIN_DEFAULTS.marginsMs.join(',')})
  --load-threads N  spinning threads in the stop-margin run (default: the cores); --load-duty P their busy %
  --streamers N   robots streaming speech during the stop-margin run (default 0)
  --speakers N    devices speaking at once in the asr run (default 20)
  --asr-rounds N  recognitions per case in the asr run's cancelled-jobs comparison (default 10)
  --asr-ms / --llm-ms / --tts-ms   fixed provider latencies (default 50 / 100 / 20)
  --tts-chunks N  chunks the bench TTS yields its 1.5 s in, all at once after --tts-ms (default 3)
  --text "..."    what the robots say (default "What is the weather like today?")`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      devices: { type: 'string', default: '50' },
      turns: { type: 'string', default: '3' },
      duration: { type: 'string', default: '20' },
      audio: { type: 'string', default: '10' },
      cycles: { type: 'string', default: '10000' },
      concurrency: { type: 'string', default: '20' },
      only: { type: 'string' },
      'asr-ms': { type: 'string', default: String(DEFAULT_LATENCIES.asrMs) },
      'llm-ms': { type: 'string', default: String(DEFAULT_LATENCIES.llmMs) },
      'tts-ms': { type: 'string', default: String(DEFAULT_LATENCIES.ttsMs) },
      'tts-chunks': { type: 'string', default: String(DEFAULT_LATENCIES.ttsChunks) },
      text: { type: 'string', default: 'What is the weather like today?' },
      speakers: { type: 'string', default: '20' },
      'asr-rounds': { type: 'string', default: '10' },
      margins: { type: 'string', default: STOP_MARGIN_DEFAULTS.marginsMs.join(',') },
      'load-threads': { type: 'string', default: String(STOP_MARGIN_DEFAULTS.loadThreads) },
      'load-duty': { type: 'string', default: String(STOP_MARGIN_DEFAULTS.loadDutyPercent) },
      streamers: { type: 'string', default: String(STOP_MARGIN_DEFAULTS.streamers) },
      sockets: { type: 'string', default: '1000' },
      nofile: { type: 'string', default: '1024' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const devices = Math.round(positive(values.devices, 'devices'));
  const turns = Math.round(positive(values.turns, 'turns'));
  const durationSec = positive(values.duration, 'duration');
  const audioSec = positive(values.audio, 'audio');
  const cycles = Math.round(positive(values.cycles, 'cycles'));
  const concurrency = Math.round(positive(values.concurrency, 'concurrency'));
  const speakers = Math.round(positive(values.speakers, 'speakers'));
  const asrRounds = Math.round(positive(values['asr-rounds'], 'asr-rounds'));
  const marginsMs = values.margins.split(',').map((margin) => positive(margin.trim(), 'margins', true));
  const loadThreads = Math.round(positive(values['load-threads'], 'load-threads', true));
  const loadDutyPercent = positive(values['load-duty'], 'load-duty', true);
  const streamers = Math.round(positive(values.streamers, 'streamers', true));
  const sockets = Math.round(positive(values.sockets, 'sockets'));
  const nofile = Math.round(positive(values.nofile, 'nofile'));
  const only = values.only?.split(',').map((s) => s.trim()) ?? [...DEFAULT_SECTIONS];
  for (const name of only) {
    if (!SECTIONS.includes(name as Section)) throw new UsageError(`--only: unknown section "${name}"`);
  }
  const wanted = (section: Section) => only.includes(section);
  const latencies: BenchLatencies = {
    ...DEFAULT_LATENCIES,
    asrMs: positive(values['asr-ms'], 'asr-ms', true),
    llmMs: positive(values['llm-ms'], 'llm-ms', true),
    ttsMs: positive(values['tts-ms'], 'tts-ms', true),
    ttsChunks: Math.round(positive(values['tts-chunks'], 'tts-chunks')),
  };

  const cpuList = cpus();
  console.log(
    `deskbot bench — node ${process.version}, ${cpuList.length} × ${cpuList[0]?.model.trim() ?? 'cpu'}, ` +
      `${new Date().toISOString()}`,
  );
  console.log(
    `sections: ${only.join(', ')}; devices ${devices}, turns ${turns}, duration ${durationSec} s` +
      (wanted('churn') ? `, churn ${cycles} cycles × ${concurrency} in flight` : ''),
  );
  // Robots and churn clients here, their peers in the server child (same limit), plus the runtime's own.
  checkOpenFiles(devices + concurrency + streamers + (wanted('sockets') ? sockets : 0) + 256);

  const dataDir = mkdtempSync(join(tmpdir(), 'deskbot-bench-main-'));
  const began = performance.now();
  const durations: string[] = [];
  try {
    const utterance = await buildUtterance(values.text, 1000, dataDir);
    if (utterance.endPacket < 0 || utterance.utterancesFound !== 1) {
      console.log(
        `  warning: the offline VAD found ${utterance.utterancesFound} utterances in "${values.text}"; ` +
          'the device-view latency needs exactly one',
      );
    }
    const timed = async (section: Section, run: () => Promise<void>) => {
      if (!wanted(section)) return;
      const start = performance.now();
      await run();
      durations.push(`${section} ${seconds(start)} s`);
    };
    await timed('latency', () => runLatency({ devices, turns, latencies, utterance }));
    await timed('streaming', () => runStreaming({ devices, durationSec, latencies, utterance }));
    await timed('capacity', () => runCapacity({ streams: devices, audioSec, utterance, dataDir }));
    await timed('churn', () => runChurn({ cycles, concurrency, latencies, utterance }));
    await timed('asr', () => runAsrQueue({ speakers, rounds: asrRounds, dataDir }));
    await timed('stop-margin', () =>
      runStopMargin({
        clients: devices,
        turns,
        marginsMs,
        loadThreads,
        loadDutyPercent,
        streamers,
        latencies,
        utterance,
      }),
    );
    await timed('sockets', () => runSockets({ sockets, nofile }));
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`\nbench done in ${seconds(began)} s (${durations.join(', ')})`);
}

const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);

class UsageError extends Error {}

function positive(text: string, name: string, zeroOk = false): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0 || (!zeroOk && value === 0)) {
    throw new UsageError(`--${name} must be a ${zeroOk ? 'non-negative' : 'positive'} number, not "${text}"`);
  }
  return value;
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`${(error as Error).message}\n${USAGE}`);
      process.exit(2);
    }
    console.error('bench crashed:', error);
    process.exit(1);
  },
);
