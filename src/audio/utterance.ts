// Cuts a stream of 16 kHz PCM into utterances with a per-window speech probability and hysteresis.
// Keeps pre-roll so the first syllable is not lost; ends after `silenceMs` below the low threshold;
// forces an end at `maxUtteranceMs`.

/** A voice-activity model scoring fixed windows of 16 kHz audio. */
export interface VadModel {
  readonly windowSamples: number;
  /** Speech probability 0..1 of one window (float samples in -1..1). */
  probability(window: Float32Array): Promise<number> | number;
  reset(): void;
}

export interface UtteranceOptions {
  silenceMs: number;
  prerollMs: number;
  maxUtteranceMs: number;
  startThreshold: number;
  endThreshold: number;
  /** Windows above the start threshold needed to start (debounces clicks). */
  startWindows: number;
}

export const DEFAULT_UTTERANCE_OPTIONS: UtteranceOptions = {
  silenceMs: 700,
  prerollMs: 600,
  maxUtteranceMs: 20_000,
  startThreshold: 0.5,
  endThreshold: 0.35,
  startWindows: 2,
};

const RATE = 16_000;

export type UtteranceEvent =
  | { type: 'speech_start' }
  | { type: 'utterance'; pcm: Int16Array; forced: boolean };

export class UtteranceDetector {
  private readonly options: UtteranceOptions;
  private pending = new Int16Array(0);
  private preroll: Int16Array[] = [];
  private prerollSamples = 0;
  private speech: Int16Array[] = [];
  private speechSamples = 0;
  private inSpeech = false;
  private aboveCount = 0;
  private silentSamples = 0;

  constructor(
    private readonly model: VadModel,
    options: Partial<UtteranceOptions> = {},
  ) {
    this.options = { ...DEFAULT_UTTERANCE_OPTIONS, ...options };
  }

  get speaking(): boolean {
    return this.inSpeech;
  }

  async push(pcm: Int16Array): Promise<UtteranceEvent[]> {
    const events: UtteranceEvent[] = [];
    const size = this.model.windowSamples;
    const all = new Int16Array(this.pending.length + pcm.length);
    all.set(this.pending);
    all.set(pcm, this.pending.length);
    let offset = 0;
    for (; offset + size <= all.length; offset += size) {
      const window = all.slice(offset, offset + size);
      await this.onWindow(window, events);
    }
    this.pending = all.slice(offset);
    return events;
  }

  /** Ends any utterance in progress (listen stop, channel close) and returns it. */
  flush(): Int16Array | null {
    const pcm = this.inSpeech && this.speechSamples > 0 ? this.collect() : null;
    this.reset();
    return pcm;
  }

  reset(): void {
    this.pending = new Int16Array(0);
    this.preroll = [];
    this.prerollSamples = 0;
    this.speech = [];
    this.speechSamples = 0;
    this.inSpeech = false;
    this.aboveCount = 0;
    this.silentSamples = 0;
    this.model.reset();
  }

  private async onWindow(window: Int16Array, events: UtteranceEvent[]): Promise<void> {
    const floats = new Float32Array(window.length);
    for (let i = 0; i < window.length; i++) floats[i] = window[i]! / 32768;
    const p = await this.model.probability(floats);
    const o = this.options;
    if (!this.inSpeech) {
      this.pushPreroll(window);
      this.aboveCount = p >= o.startThreshold ? this.aboveCount + 1 : 0;
      if (this.aboveCount >= o.startWindows) {
        this.inSpeech = true;
        this.speech = this.preroll;
        this.speechSamples = this.prerollSamples;
        this.preroll = [];
        this.prerollSamples = 0;
        this.silentSamples = 0;
        events.push({ type: 'speech_start' });
      }
      return;
    }
    this.speech.push(window);
    this.speechSamples += window.length;
    this.silentSamples = p < o.endThreshold ? this.silentSamples + window.length : 0;
    const forced = this.speechSamples >= (o.maxUtteranceMs * RATE) / 1000;
    if (this.silentSamples >= (o.silenceMs * RATE) / 1000 || forced) {
      events.push({ type: 'utterance', pcm: this.collect(), forced });
      this.inSpeech = false;
      this.aboveCount = 0;
      this.silentSamples = 0;
    }
  }

  private pushPreroll(window: Int16Array): void {
    this.preroll.push(window);
    this.prerollSamples += window.length;
    const max = (this.options.prerollMs * RATE) / 1000;
    while (this.prerollSamples - (this.preroll[0]?.length ?? 0) >= max) {
      this.prerollSamples -= this.preroll.shift()!.length;
    }
  }

  private collect(): Int16Array {
    // Keep ~200 ms of the trailing silence; recognisers like a little, not 700 ms.
    const keepSilence = Math.min(this.silentSamples, 0.2 * RATE);
    const length = this.speechSamples - this.silentSamples + keepSilence;
    const out = new Int16Array(length);
    let offset = 0;
    for (const chunk of this.speech) {
      if (offset >= length) break;
      const take = Math.min(chunk.length, length - offset);
      out.set(chunk.subarray(0, take), offset);
      offset += take;
    }
    this.speech = [];
    this.speechSamples = 0;
    return out;
  }
}
