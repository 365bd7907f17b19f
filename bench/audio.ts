// The one utterance every virtual robot says: espeak-ng speech at 16 kHz plus trailing silence, encoded
// to 60 ms Opus packets once. Also finds, offline with the same decoder, VAD and settings as the server,
// which packet ends the utterance, so the device side can time "end of utterance → first audio" too.
import { OpusFrameEncoder, OpusPacketDecoder } from '../src/audio/opus.js';
import { SileroVad } from '../src/audio/silero.js';
import { UtteranceDetector, type UtteranceOptions } from '../src/audio/utterance.js';
import { parseConfig } from '../src/config/index.js';
import { speechPcm16k } from '../src/device/voice.js';
import { seededRandom } from './providers.js';

export const UPLINK_FRAME_MS = 60;
const RATE = 16_000;

export interface Utterance {
  text: string;
  packets: Uint8Array[];
  speechMs: number;
  totalMs: number;
  /** Index of the packet whose arrival makes the server's VAD end the utterance (-1: never). */
  endPacket: number;
  /** Utterances the offline VAD found in one pass (should be 1). */
  utterancesFound: number;
}

/** The server's utterance settings, from the configuration defaults (as startVoiceServer maps them). */
export function serverUtteranceOptions(dataDir: string): Partial<UtteranceOptions> {
  const s = parseConfig({ data_dir: dataDir }).VAD.silero;
  return {
    silenceMs: s.min_silence_duration_ms,
    prerollMs: s.preroll_ms,
    maxUtteranceMs: s.max_utterance_ms,
    startThreshold: s.threshold,
    endThreshold: s.threshold_low,
  };
}

export async function buildUtterance(text: string, silenceMs: number, dataDir: string): Promise<Utterance> {
  const speech = await speechPcm16k(text);
  const silence = roomNoise((RATE * silenceMs) / 1000);
  const pcm = new Int16Array(speech.length + silence.length);
  pcm.set(speech);
  pcm.set(silence, speech.length);
  const encoder = new OpusFrameEncoder(RATE, UPLINK_FRAME_MS);
  const packets = [...encoder.encode(pcm), ...encoder.flush()];

  const decoder = new OpusPacketDecoder(RATE);
  const detector = new UtteranceDetector(await SileroVad.create(), serverUtteranceOptions(dataDir));
  let endPacket = -1;
  let utterancesFound = 0;
  for (const [index, packet] of packets.entries()) {
    const decoded = decoder.decode(packet);
    if (!decoded) continue;
    for (const event of await detector.push(decoded)) {
      if (event.type !== 'utterance') continue;
      utterancesFound++;
      if (endPacket < 0) endPacket = index;
    }
  }
  return {
    text,
    packets,
    speechMs: (speech.length / RATE) * 1000,
    totalMs: packets.length * UPLINK_FRAME_MS,
    endPacket,
    utterancesFound,
  };
}

/** A quiet room, not digital zero: Opus then sends small but real packets, as a device does. */
function roomNoise(samples: number): Int16Array {
  const random = seededRandom(11);
  const out = new Int16Array(samples);
  for (let i = 0; i < samples; i++) out[i] = Math.round(40 * (random() - 0.5));
  return out;
}
