// The robot's microphone side of the protocol: 16 kHz PCM encoded to Opus frames as the firmware does and
// sent in real time (or as fast as possible for tests), with the speech sources the emulator can "hear".
import { setTimeout as delay } from 'node:timers/promises';
import { concatPcm, OpusFrameEncoder } from '../audio/opus.js';
import { loadResampler, resample } from '../audio/resample.js';
import { decodeWav } from '../audio/wav.js';
import { speechPcm16k } from './voice.js';

export interface PcmSendOptions {
  /** Real time (the default for a person talking) or as fast as the socket takes it. */
  paced?: boolean;
  frameMs?: 20 | 60;
}

/** Encodes 16 kHz PCM as Opus packets and hands each to `send` with its timestamp, paced in real time unless told not to. */
export async function streamPcm(
  pcm16k: Int16Array,
  send: (opus: Uint8Array, timestampMs: number) => void,
  options: PcmSendOptions = {},
): Promise<void> {
  const encoder = new OpusFrameEncoder(16000, options.frameMs ?? 60);
  const packets = [...encoder.encode(pcm16k), ...encoder.flush()];
  let timestampMs = 0;
  const start = performance.now();
  for (const packet of packets) {
    send(packet, timestampMs);
    timestampMs += encoder.frameMs;
    if (options.paced !== false) {
      const waitMs = start + timestampMs - performance.now();
      if (waitMs > 0) await delay(waitMs);
    }
  }
}

/** espeak-ng saying `text` at 16 kHz, then `silenceMs` of silence so the server's VAD sees the end. */
export async function spokenPcm(text: string, silenceMs: number): Promise<Int16Array> {
  const pcm = await speechPcm16k(text);
  return concatPcm(pcm, new Int16Array((16000 * silenceMs) / 1000));
}

/** A 16-bit WAV file (any rate) as 16 kHz microphone input, with one second of trailing silence. */
export async function wavPcm(file: Uint8Array): Promise<Int16Array> {
  await loadResampler();
  const wav = decodeWav(file);
  return concatPcm(resample(wav.pcm, wav.sampleRate, 16000), new Int16Array(16000));
}
