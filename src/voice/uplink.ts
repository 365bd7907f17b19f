// One device's microphone: Opus packets → 16 kHz PCM → utterances. In auto/realtime mode the VAD cuts them;
// in manual mode the audio is kept until `listen stop` (takeManual). Bounded both ways: a device that sends
// faster than the VAD scores loses audio (counted), and a manual recording stops growing at maxUtteranceMs.
import { OpusPacketDecoder } from '../audio/opus.js';
import { UtteranceDetector, type UtteranceOptions, type VadModel } from '../audio/utterance.js';
import type { Logger } from '../util/log.js';

export const UPLINK_RATE = 16_000;
/** Uplink packets waiting for the VAD before new ones are dropped (250 × 60 ms = 15 s, ~0.5 MB of PCM). */
const MAX_AUDIO_BACKLOG = 250;

export interface UplinkOptions {
  vad: VadModel | Promise<VadModel>;
  utterance: Partial<UtteranceOptions>;
  maxUtteranceMs: number;
  log: Logger;
  /** The VAD found the end of an utterance. */
  onUtterance: (pcm: Int16Array) => void;
}

export class UplinkAudio {
  private readonly decoder = new OpusPacketDecoder(UPLINK_RATE);
  private detector: UtteranceDetector | undefined;
  private chain: Promise<void>;
  private backlog = 0;
  private manual: Int16Array[] = [];
  private manualSamples = 0;
  /** Packets dropped because the VAD fell behind. */
  dropped = 0;

  constructor(private readonly options: UplinkOptions) {
    // Audio waits for the VAD to load; control frames (handled elsewhere) do not.
    this.chain = Promise.resolve(options.vad).then((vad) => {
      this.detector = new UtteranceDetector(vad, options.utterance);
    });
    this.chain.catch((error) => options.log.error({ err: error }, 'voice activity detector failed to load'));
  }

  push(packet: Uint8Array, manual: boolean): void {
    const pcm = this.decoder.decode(packet);
    if (!pcm) return;
    if (manual) {
      if (this.manualSamples < (this.options.maxUtteranceMs * UPLINK_RATE) / 1000) {
        this.manual.push(pcm);
        this.manualSamples += pcm.length;
      }
      return;
    }
    // The VAD is async; windows of one device must stay in order.
    if (this.backlog >= MAX_AUDIO_BACKLOG) {
      this.dropped++;
      return;
    }
    this.backlog++;
    this.chain = this.chain
      .then(async () => {
        for (const event of (await this.detector?.push(pcm)) ?? []) {
          if (event.type === 'utterance') this.options.onUtterance(event.pcm);
        }
      })
      .catch((error) =>
        this.options.log.warn({ err: (error as Error).message }, 'voice activity detection failed'),
      )
      .finally(() => {
        this.backlog--;
      });
  }

  /** The manual-mode recording so far (emptied). */
  takeManual(): Int16Array {
    const out = new Int16Array(this.manualSamples);
    let offset = 0;
    for (const chunk of this.manual) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    this.manual = [];
    this.manualSamples = 0;
    return out;
  }

  /** A new turn: the VAD's state (after the audio already queued), the decoder and any manual audio. */
  reset(): void {
    this.chain = this.chain.then(() => this.detector?.reset());
    this.decoder.reset();
    this.manual = [];
    this.manualSamples = 0;
  }
}
