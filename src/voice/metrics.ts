// The voice server's own metrics (GET :8003/metrics) and the per-turn report it sends the bridge: stage
// timings measured where they happen, from the end of the user's utterance to the stt frame, the model's
// first token and the first reply audio frame.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PocketsphinxStats } from '../providers/asr/pocketsphinx.js';
import { REFUSAL_REASONS } from '../providers/asr/recognition-queue.js';
import type { AsrProvider } from '../providers/asr/types.js';
import type { LimitName } from '../util/http-app.js';
import { LATENCY_BUCKETS_SEC } from '../util/metrics.js';
import type { TurnTiming } from './turn-timing.js';

/** One turn as the bridge's dashboard and first-audio histogram receive it (POST /api/voice/turn). */
export interface TurnReport {
  device_id: string;
  session_id: string;
  turn_id: number;
  kind: TurnTiming['kind'];
  /** The recognised (or injected) text, cut to 200 characters. */
  text: string;
  aborted: boolean;
  /** True when the clock starts at the end of a spoken utterance; false for injected text (say, inject-text). */
  from_utterance: boolean;
  /** Milliseconds from the end of the utterance (or the reply's start) to each stage; null = not reached. */
  asr_ms: number | null;
  stt_ms: number | null;
  first_token_ms: number | null;
  first_audio_ms: number | null;
  total_ms: number | null;
  /** Epoch seconds when the turn ended. */
  ts: number;
}

export const TURN_STAGES = ['stt', 'first_token', 'first_audio'] as const;

export function turnReport(timing: TurnTiming, deviceId: string, sessionId: string): TurnReport {
  const origin = timing.utteranceEndAt ?? timing.replyStartAt;
  const since = (at: number | undefined) => (at === undefined ? null : Math.max(0, Math.round(at - origin)));
  return {
    device_id: deviceId,
    session_id: sessionId,
    turn_id: timing.turnId,
    kind: timing.kind,
    text: timing.text.slice(0, 200),
    aborted: timing.aborted,
    from_utterance: timing.utteranceEndAt !== undefined,
    asr_ms: timing.asrMs === undefined ? null : Math.round(timing.asrMs),
    stt_ms: since(timing.sttAt),
    first_token_ms: since(timing.modelFirstTokenAt),
    first_audio_ms: since(timing.firstAudioAt),
    total_ms: since(timing.endAt),
    ts: Date.now() / 1000,
  };
}

export class VoiceMetrics {
  readonly registry = new Registry();
  private readonly stages: Histogram<'stage'>;
  private readonly turns: Counter<'kind' | 'outcome'>;
  private readonly limitRefusals: Counter<'limit'>;

  /** `asr`: a recogniser with a queue in front (queueStats()) gets its queue's counters mirrored here. */
  constructor(activeSessions: () => number, asr?: AsrProvider) {
    const registers = [this.registry];
    this.stages = new Histogram({
      name: 'deskbot_voice_turn_stage_seconds',
      help: 'End of the user utterance to each turn stage: stt frame, first model token, first audio frame',
      labelNames: ['stage'],
      buckets: LATENCY_BUCKETS_SEC,
      registers,
    });
    this.turns = new Counter({
      name: 'deskbot_voice_turns_total',
      help: 'Replies the voice server ran, by kind and outcome',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    new Gauge({
      name: 'deskbot_voice_active_sessions',
      help: 'Device WebSocket sessions connected now',
      registers,
      collect() {
        this.set(activeSessions());
      },
    });
    this.limitRefusals = new Counter({
      name: 'deskbot_voice_limit_refusals_total',
      help: 'Connections refused or closed, or MCP tool lists cut, by a limit (docs/limits.md)',
      labelNames: ['limit'],
      registers,
    });
    if (asr && hasQueueStats(asr)) registerAsrQueueMetrics(this.registry, () => asr.queueStats());
  }

  /** Counts one limit hit (pass as `onLimit` to the WebSocket listener, the HTTP app and the sessions). */
  limitHit(limit: LimitName): void {
    this.limitRefusals.inc({ limit });
  }

  /** Stage timings count only for spoken turns: an injected reply has no utterance to measure from. */
  observeTurn(report: TurnReport): void {
    this.turns.inc({ kind: report.kind, outcome: report.aborted ? 'aborted' : 'completed' });
    if (!report.from_utterance) return;
    const values = {
      stt: report.stt_ms,
      first_token: report.first_token_ms,
      first_audio: report.first_audio_ms,
    };
    for (const stage of TURN_STAGES) {
      const ms = values[stage];
      if (ms !== null) this.stages.observe({ stage }, ms / 1000);
    }
  }

  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** A recogniser that queues its jobs (PocketsphinxAsr); wrappers that forward queueStats() count too. */
export interface QueuedAsr {
  queueStats(): PocketsphinxStats;
}

function hasQueueStats(asr: AsrProvider): asr is AsrProvider & QueuedAsr {
  return typeof (asr as Partial<QueuedAsr>).queueStats === 'function';
}

type StatsMetric = [
  kind: 'gauge' | 'counter',
  name: string,
  help: string,
  value: (s: PocketsphinxStats) => number,
];

const ASR_QUEUE_METRICS: StatsMetric[] = [
  ['gauge', 'deskbot_voice_asr_queued', 'Recognitions waiting for a decoder now', (s) => s.queued],
  ['gauge', 'deskbot_voice_asr_running', 'Recognitions running on a decoder now', (s) => s.running],
  [
    'gauge',
    'deskbot_voice_asr_decoders',
    'Speech decoders loaded (they load on first need, up to the pool size)',
    (s) => s.decoders,
  ],
  ['counter', 'deskbot_voice_asr_jobs_started_total', 'Recognitions handed to a decoder', (s) => s.started],
  [
    'counter',
    'deskbot_voice_asr_jobs_cancelled_total',
    'Recognitions cancelled before they started: they never reached a decoder',
    (s) => s.cancelled,
  ],
  [
    'counter',
    'deskbot_voice_asr_passes_total',
    'Search passes the decoders ran (one or two per recognition)',
    (s) => s.passes,
  ],
  [
    'counter',
    'deskbot_voice_asr_second_pass_skipped_total',
    'Recognitions cancelled during their first pass whose command-grammar pass was skipped',
    (s) => s.secondPassSkipped,
  ],
];

/** The queue keeps its own totals (it knows nothing of Prometheus); each scrape copies them. */
function registerAsrQueueMetrics(registry: Registry, read: () => PocketsphinxStats): void {
  const registers = [registry];
  for (const [kind, name, help, value] of ASR_QUEUE_METRICS) {
    if (kind === 'gauge') {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(value(read()));
        },
      });
      continue;
    }
    new Counter({
      name,
      help,
      registers,
      // A counter cannot be set: reset it, then add the queue's total.
      collect() {
        this.reset();
        this.inc(value(read()));
      },
    });
  }
  new Counter({
    name: 'deskbot_voice_asr_queue_dropped_total',
    help: 'Recognitions refused or removed unstarted: queue full, superseded by the same device, shut down',
    labelNames: ['reason'],
    registers,
    collect() {
      const { dropped } = read();
      this.reset();
      for (const reason of REFUSAL_REASONS) this.inc({ reason }, dropped[reason]);
    },
  });
}
