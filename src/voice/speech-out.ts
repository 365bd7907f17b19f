// Speaking one reply to the device: `tts start` before any audio, the emotion frame from the leading
// emoji, `sentence_start {text}` as each segment begins to play, paced Opus, a little trailing silence, and
// `tts stop` a margin after the estimated end of the speech — or at once when the reply is cancelled.
import { OpusFrameEncoder } from '../audio/opus.js';
import type { Clock, Pacer } from '../audio/pacer.js';
import { resample } from '../audio/resample.js';
import type { ServerFrame } from '../protocol/index.js';
import type { TtsProvider } from '../providers/tts/types.js';
import { FALLBACK_EMOJI, splitLeadingEmoji, stripEmoji } from '../robot/emotions.js';
import { cleanForSpeech } from './segmenter.js';

export interface SpeechSink {
  sessionId: string;
  sendJson(frame: ServerFrame): boolean;
}

export interface SpeechOutOptions {
  sink: SpeechSink;
  tts: TtsProvider;
  pacer: Pacer;
  replyId: number;
  signal: AbortSignal;
  sampleRate: 24000;
  frameMs: number;
  /** Wait this long after the estimated end of the speech before `tts stop` (DESIGN §4: ~400 ms). */
  stopMarginMs: number;
  /**
   * … and at least this long after it plus what late frames hid from the estimate (Pacer.takeLateness), for
   * a client that stalls when a frame comes late (default DEFAULT_STALL_MARGIN_MS).
   */
  stallMarginMs?: number;
  /** Silence sent after the speech, played inside the stop margin (default DEFAULT_TAIL_SILENCE_MS). */
  tailSilenceMs?: number;
  now: () => number;
}

/**
 * The xiaozhi-esp32-server browser test page schedules audio only while it holds 240 ms unplayed, so the last
 * < 240 ms of a reply waits for audio that never comes and `tts stop` flushes it (bench/flush-client.ts).
 * 240 ms of silence after the speech carries all of it out, including the ~7 ms that Opus's look-ahead puts
 * into the first packet after it. It plays inside the stop margin, so the firmware's stop is no later.
 */
export const DEFAULT_TAIL_SILENCE_MS = 240;

/**
 * The test page plays a reply later than the playout estimate by what late frames hid from it (up to the
 * pre-buffer) plus its own delays: the 6-packet gate before its first audio, 30 ms receive batches, its event
 * loop. In bench/stop-margin under CPU load, lateness + 200 ms brought first replies within 60 ms of a loss (their
 * 6th frame came late); + 300 ms kept every reply ≥ 170 ms away. The firmware plays frames as they arrive, so the
 * estimate is right for it and it needs only the stop margin: the larger wins, and the firmware waits longer
 * only after our frames left more than 100 ms late.
 */
export const DEFAULT_STALL_MARGIN_MS = 300;

export class SpeechOut {
  private started = false;
  private emotionSent = false;
  private stopped = false;
  private readonly encoder: OpusFrameEncoder;
  /** Every segment spoken, cleaned, for the dialogue history. */
  readonly spoken: string[] = [];
  /** Milliseconds the speech engine took to its first chunk of audio (first segment only). */
  ttsFirstChunkMs: number | undefined;

  constructor(private readonly options: SpeechOutOptions) {
    this.encoder = new OpusFrameEncoder(options.sampleRate, options.frameMs);
  }

  get hasStarted(): boolean {
    return this.started;
  }

  /** The speech engine's name, for log lines that say which part failed. */
  get ttsName(): string {
    return this.options.tts.name;
  }

  /** Sends the face emotion for the reply's leading emoji (or neutral) once. Returns the text after it. */
  emotion(segment: string): string {
    if (this.emotionSent) return segment;
    this.emotionSent = true;
    const { emoji, emotion, rest } = splitLeadingEmoji(segment);
    const shown = emotion ? emoji! : FALLBACK_EMOJI;
    this.send({ type: 'llm', emotion: emotion ?? 'neutral', text: shown });
    return rest;
  }

  /**
   * Synthesises one segment (markdown and emoji removed) and queues it behind the segments before it.
   * A `lead` segment starts a new part of the reply (a tool filler, the answer after it): its emoji counts.
   */
  async speak(segment: string, lead = false): Promise<void> {
    if (lead) this.emotionSent = false;
    await this.speakVerbatim(stripEmoji(cleanForSpeech(this.emotion(segment))));
  }

  /** Synthesises text as given (no emotion frame, no clean-up beyond what the engine needs). */
  async speakVerbatim(text: string): Promise<void> {
    const { signal, tts } = this.options;
    if (!text.trim() || signal.aborted) return;
    this.spoken.push(text);
    const announce = this.announcer(text);
    const started = performance.now();
    for await (const pcm of tts.synthesize(text, signal)) {
      if (signal.aborted) return;
      this.ttsFirstChunkMs ??= performance.now() - started;
      await this.enqueuePcm(resample(pcm, tts.sampleRate, this.options.sampleRate), announce);
    }
    await this.enqueue(this.encoder.flush(), announce);
  }

  /** Queues ready PCM at the downlink rate (a song, a sound) as one "sentence" labelled `label`. */
  async playPcm(pcm: Int16Array, label: string): Promise<void> {
    const announce = this.announcer(label);
    await this.enqueuePcm(pcm, announce);
    await this.enqueue(this.encoder.flush(), announce);
  }

  /** Encodes frame by frame, so the first frame leaves before the rest of the chunk is encoded. */
  private async enqueuePcm(pcm: Int16Array, announce: () => Promise<void>): Promise<void> {
    const step = this.encoder.samplesPerFrame;
    for (let offset = 0; offset < pcm.length && !this.options.signal.aborted; offset += step) {
      await this.enqueue(this.encoder.encode(pcm.subarray(offset, offset + step)), announce);
    }
  }

  /** `sentence_start` goes into the queue just before the first frame of its text. */
  private announcer(text: string): () => Promise<void> {
    let done = false;
    return async () => {
      if (done) return;
      done = true;
      await this.begin();
      this.options.pacer.enqueueControl(this.options.replyId, () =>
        this.send({ type: 'tts', state: 'sentence_start', text }),
      );
    };
  }

  private async enqueue(packets: Uint8Array[], announce: () => Promise<void>): Promise<void> {
    const { pacer, replyId, signal } = this.options;
    for (const packet of packets) {
      await pacer.waitForRoom(signal);
      if (signal.aborted) return;
      await announce();
      if (signal.aborted) return;
      pacer.enqueueAudio(replyId, packet);
    }
  }

  /** Sends the trailing silence, waits for the speech to play out plus the margin, then sends `tts stop`. */
  async finish(): Promise<void> {
    const { pacer, replyId, signal } = this.options;
    if (!this.started) return;
    const silenceMs = await this.trailingSilence();
    await pacer.drained(replyId, signal);
    // The margins count from the end of the speech: the silence plays inside them. Silence sent late (the
    // device ran dry) only moves the estimate, and the stop, later.
    const stall = pacer.takeLateness(replyId) + (this.options.stallMarginMs ?? DEFAULT_STALL_MARGIN_MS);
    const afterMs = Math.max(this.options.stopMarginMs, stall);
    const wait = pacer.playoutEndsAt - silenceMs + afterMs - this.options.now();
    if (wait > 0 && !signal.aborted) await sleep(pacer.clock, wait, signal);
    if (!signal.aborted) this.stop();
  }

  /** Queues the trailing silence (whole frames); returns its length in ms. */
  private async trailingSilence(): Promise<number> {
    const { frameMs, signal } = this.options;
    const frames = Math.ceil((this.options.tailSilenceMs ?? DEFAULT_TAIL_SILENCE_MS) / frameMs);
    if (frames <= 0 || signal.aborted) return 0;
    const packets = this.encoder.encode(new Int16Array(frames * this.encoder.samplesPerFrame));
    await this.enqueue(packets, async () => {});
    return packets.length * frameMs;
  }

  /** Cancels: nothing more of this reply leaves the pacer. */
  cancel(): void {
    this.options.pacer.drop(this.options.replyId);
  }

  /** `tts stop` now, once (on abort the device must hear it at once). */
  stopNow(): void {
    this.stop();
  }

  /**
   * `tts start`, then one event-loop turn before any audio: the firmware enters Speaking on a scheduled task
   * and drops audio that arrives before it (DESIGN §4).
   */
  private async begin(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.send({ type: 'tts', state: 'start' });
    await new Promise((resolve) => setImmediate(resolve));
  }

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.send({ type: 'tts', state: 'stop' });
  }

  private send(frame: Omit<ServerFrame, 'session_id'>): void {
    this.options.sink.sendJson({ ...frame, session_id: this.options.sink.sessionId } as ServerFrame);
  }
}

/** Resolves after `ms` on `clock`, or at once when `signal` aborts. */
function sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clock.clearTimer(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimer(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
