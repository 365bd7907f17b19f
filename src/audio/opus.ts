// Opus encode/decode over @evan/opus (prebuilt native; DESIGN §6 measured it fastest).
import { Decoder, Encoder } from '@evan/opus';

export type OpusRate = 8000 | 12000 | 16000 | 24000 | 48000;

/** Encodes mono 16-bit PCM into fixed-duration Opus packets, carrying any remainder to the next call. */
export class OpusFrameEncoder {
  readonly samplesPerFrame: number;
  private readonly encoder: Encoder;
  private pending = new Int16Array(0);

  constructor(
    readonly sampleRate: OpusRate,
    readonly frameMs = 60,
    options: { bitrate?: number; complexity?: number } = {},
  ) {
    this.samplesPerFrame = (sampleRate * frameMs) / 1000;
    this.encoder = new Encoder({ channels: 1, sample_rate: sampleRate, application: 'voip' });
    this.encoder.bitrate = options.bitrate ?? 24_000;
    this.encoder.complexity = (options.complexity ?? 5) as 5;
  }

  /** Returns every whole frame available; a partial frame waits for more PCM or flush(). */
  encode(pcm: Int16Array): Uint8Array[] {
    const all = concatPcm(this.pending, pcm);
    const packets: Uint8Array[] = [];
    let offset = 0;
    for (; offset + this.samplesPerFrame <= all.length; offset += this.samplesPerFrame) {
      packets.push(this.encoder.encode(all.subarray(offset, offset + this.samplesPerFrame)).slice());
    }
    this.pending = all.slice(offset);
    return packets;
  }

  /** Pads the remainder with silence into one last frame. */
  flush(): Uint8Array[] {
    if (this.pending.length === 0) return [];
    const last = new Int16Array(this.samplesPerFrame);
    last.set(this.pending);
    this.pending = new Int16Array(0);
    return [this.encoder.encode(last).slice()];
  }

  reset(): void {
    this.pending = new Int16Array(0);
    this.encoder.reset();
  }
}

/** Decodes Opus packets of any frame duration to mono 16-bit PCM at the chosen rate. */
export class OpusPacketDecoder {
  private readonly decoder: Decoder;

  constructor(readonly sampleRate: OpusRate) {
    this.decoder = new Decoder({ channels: 1, sample_rate: sampleRate });
  }

  /** Returns null for a packet libopus refuses (empty, corrupt) instead of throwing. */
  decode(packet: Uint8Array): Int16Array | null {
    if (packet.length === 0) return null;
    try {
      const bytes = this.decoder.decode(packet);
      return new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1).slice();
    } catch {
      return null;
    }
  }

  reset(): void {
    this.decoder.reset();
  }
}

export function concatPcm(a: Int16Array, b: Int16Array): Int16Array {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Int16Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
