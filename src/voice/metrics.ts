// The voice server's own metrics (GET :8003/metrics) and the per-turn report it sends the bridge: stage
// timings measured where they happen, from the end of the user's utterance to the stt frame, the model's
// first token and the first reply audio frame.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { LATENCY_BUCKETS_SEC } from '../util/metrics.js';
import type { TurnTiming } from './conversation.js';

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

  constructor(activeSessions: () => number) {
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
