// The last few seconds a device's microphone sent, kept while the robot is in security mode, so the bridge can
// have them captioned. Bounded: a ring of at most `maxSeconds` of 16 kHz PCM per device.
import { OpusPacketDecoder } from '../audio/opus.js';

const RATE = 16_000;

export class AudioRecorder {
  private readonly decoder = new OpusPacketDecoder(RATE);
  private chunks: Int16Array[] = [];
  private samples = 0;

  constructor(private readonly maxSeconds = 15) {}

  push(packet: Uint8Array): void {
    const pcm = this.decoder.decode(packet);
    if (!pcm) return;
    this.chunks.push(pcm);
    this.samples += pcm.length;
    while (this.samples - (this.chunks[0]?.length ?? 0) >= this.maxSeconds * RATE) {
      this.samples -= this.chunks.shift()!.length;
    }
  }

  /** The last `seconds` recorded (possibly fewer), as 16 kHz PCM. */
  last(seconds: number): Int16Array {
    const want = Math.min(this.samples, Math.round(seconds * RATE));
    const out = new Int16Array(want);
    let offset = want;
    for (let i = this.chunks.length - 1; i >= 0 && offset > 0; i--) {
      const chunk = this.chunks[i]!;
      const take = Math.min(chunk.length, offset);
      out.set(chunk.subarray(chunk.length - take), offset - take);
      offset -= take;
    }
    return out;
  }

  clear(): void {
    this.chunks = [];
    this.samples = 0;
    this.decoder.reset();
  }
}
