// The robot's speaker side of the protocol, as the firmware does it: audio is played only while Speaking
// (between `tts start` and `tts stop`), `tts start` resets the decoder, and one reply's PCM and sentence texts
// are collected until `tts stop`.
import { OpusPacketDecoder } from '../audio/opus.js';
import { type BinaryVersion, decodeBinary } from '../protocol/index.js';

export type PlayResult = { played: Int16Array } | { dropped: 'not_speaking' | 'undecodable' };
export type ReceiveResult = PlayResult | { dropped: 'bad_packet' | 'not_audio' };

export class Speaker {
  speaking = false;
  private decoder: OpusPacketDecoder | undefined;
  private pcm: Int16Array[] = [];
  private sentences: string[] = [];

  /** The server hello fixed the downlink rate. */
  configure(sampleRate: number): void {
    this.decoder = new OpusPacketDecoder(sampleRate as 24000);
  }

  start(): void {
    this.speaking = true;
    this.decoder?.reset();
    this.pcm = [];
    this.sentences = [];
  }

  sentence(text: string | undefined): void {
    if (text) this.sentences.push(text);
  }

  /** Ends the reply: everything heard since `start`. */
  stop(): { pcm: Int16Array; sentences: string[] } {
    this.speaking = false;
    const total = this.pcm.reduce((n, chunk) => n + chunk.length, 0);
    const pcm = new Int16Array(total);
    let offset = 0;
    for (const chunk of this.pcm) {
      pcm.set(chunk, offset);
      offset += chunk.length;
    }
    return { pcm, sentences: this.sentences };
  }

  play(opus: Uint8Array): PlayResult {
    if (!this.speaking) return { dropped: 'not_speaking' };
    const pcm = this.decoder?.decode(opus);
    if (!pcm) return { dropped: 'undecodable' };
    this.pcm.push(pcm);
    return { played: pcm };
  }

  /** One binary downlink packet as the firmware takes it: unframed, then played if it is audio. */
  receive(version: BinaryVersion, data: Uint8Array): ReceiveResult {
    let packet: ReturnType<typeof decodeBinary>;
    try {
      packet = decodeBinary(version, data);
    } catch {
      return { dropped: 'bad_packet' };
    }
    if (packet.payloadType !== 0) return { dropped: 'not_audio' };
    return this.play(packet.payload);
  }
}
