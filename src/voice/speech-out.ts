// Speaking one reply to the device: `tts start` before any audio, the emotion frame from the leading
// emoji, `sentence_start {text}` as each segment begins to play, paced Opus, and `tts stop` after the
// estimated playout plus a margin — or at once when the reply is cancelled.
import { OpusFrameEncoder } from '../audio/opus.js';
import type { Pacer } from '../audio/pacer.js';
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
  /** Wait this long after the estimated playout before `tts stop` (DESIGN §4: ~400 ms). */
  stopMarginMs: number;
  now: () => number;
}

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

  /** Waits for the queued audio to play out, then sends `tts stop`. */
  async finish(): Promise<void> {
    const { pacer, replyId, signal } = this.options;
    if (!this.started) return;
    await pacer.drained(replyId, signal);
    const wait = pacer.playoutEndsAt - this.options.now() + this.options.stopMarginMs;
    if (wait > 0 && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        signal.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
    }
    if (!signal.aborted) this.stop();
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
