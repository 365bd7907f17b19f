// eSpeak NG through Debian's libespeak-ng via koffi: synthesis runs on a koffi worker thread (the
// event loop keeps pacing other devices), audio arrives in ~200 ms chunks through a callback.
// The library is one global engine; espeak-lib.ts queues every job in the process.
import { AsyncQueue } from '../../util/async-queue.js';
import { loadEspeak } from '../native/espeak-lib.js';
import type { TtsProvider } from './types.js';

export interface EspeakOptions {
  voice: string;
  /** Words per minute. */
  rate: number;
  /** 0-100. */
  pitch: number;
}

export class EspeakTts implements TtsProvider {
  readonly name = 'espeak';
  readonly sampleRate: number;
  private readonly lib = loadEspeak();

  constructor(private readonly options: EspeakOptions) {
    this.sampleRate = this.lib.sampleRate;
  }

  describe(): string {
    return `espeak-ng (voice ${this.options.voice}, ${this.options.rate} wpm, ${this.sampleRate} Hz)`;
  }

  synthesize(text: string, signal: AbortSignal): AsyncIterable<Int16Array> {
    const queue = new AsyncQueue<Int16Array>();
    this.lib
      .synthesize(text, this.options, signal, (pcm) => queue.push(pcm))
      .then(
        () => queue.end(),
        (error) => queue.fail(error),
      );
    return queue;
  }
}
