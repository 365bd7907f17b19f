// Turn reports from the voice server (POST /api/voice/turn): the first-audio latency histogram, the dashboard's
// "recent turns" with their latency breakdown, and a `turn` nudge on the dashboard's event stream.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { canonicalDeviceId } from '../protocol/index.js';
import { parseBody } from '../util/http-error.js';
import type { TurnReport } from '../voice/metrics.js';

const ms = z.number().finite().min(0).max(3_600_000).nullable();
const turnReportSchema = z.object({
  device_id: z.string().min(1).max(128).transform(canonicalDeviceId),
  session_id: z.string().max(200).default(''),
  turn_id: z.number().int().min(0),
  kind: z.enum(['chat', 'speak', 'say', 'asset', 'greeting']),
  text: z.string().max(200).default(''),
  aborted: z.boolean().default(false),
  from_utterance: z.boolean().default(false),
  asr_ms: ms.default(null),
  stt_ms: ms.default(null),
  first_token_ms: ms.default(null),
  first_audio_ms: ms.default(null),
  total_ms: ms.default(null),
  ts: z.number().finite().nonnegative(),
});

export interface TurnLogOptions {
  /** Reports kept for the dashboard (default 50). */
  keep?: number;
  /** Told of every spoken turn that reached its first audio frame (seconds). */
  onFirstAudio?: (seconds: number) => void;
  /** Told of every accepted report (the dashboard stream). */
  onReport?: (report: TurnReport) => void;
}

export class TurnLog {
  private readonly reports: TurnReport[] = [];
  private readonly keep: number;

  constructor(private readonly options: TurnLogOptions = {}) {
    this.keep = Math.max(1, options.keep ?? 50);
  }

  add(report: TurnReport): void {
    this.reports.push(report);
    if (this.reports.length > this.keep) this.reports.splice(0, this.reports.length - this.keep);
    if (report.from_utterance && report.first_audio_ms !== null)
      this.options.onFirstAudio?.(report.first_audio_ms / 1000);
    this.options.onReport?.(report);
  }

  /** Newest first. */
  recent(limit = this.keep): TurnReport[] {
    return this.reports.slice(-limit).reverse();
  }
}

export function registerTurnRoute(app: FastifyInstance, log: TurnLog): void {
  app.post('/api/voice/turn', async (request) => {
    log.add(parseBody(turnReportSchema, request.body));
    return { ok: true };
  });
}
