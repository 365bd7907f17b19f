// Stage timings of one turn, shared by the conversation (which fills them) and the metrics (which read them).
import type { ReplyKind } from './turn-machine.js';

/** Stage timings of one turn (performance.now() milliseconds), for metrics and the bench. */
export interface TurnTiming {
  turnId: number;
  kind: ReplyKind;
  text: string;
  /** The VAD (or listen stop) ended the utterance. */
  utteranceEndAt?: number;
  asrMs?: number;
  sttAt?: number;
  replyStartAt: number;
  modelFirstTokenAt?: number;
  ttsFirstChunkMs?: number;
  firstAudioAt?: number;
  endAt?: number;
  aborted: boolean;
}
