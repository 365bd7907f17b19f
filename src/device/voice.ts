// The virtual robot's "mouth": text → espeak-ng speech at 16 kHz, as a person near the robot would say it.
import { loadResampler, resample } from '../audio/resample.js';
import { EspeakTts } from '../providers/tts/espeak.js';

let tts: EspeakTts | undefined;

export async function speechPcm16k(
  text: string,
  voice = { voice: 'en-us', rate: 165, pitch: 50 },
): Promise<Int16Array> {
  await loadResampler();
  tts ??= new EspeakTts(voice);
  const chunks: Int16Array[] = [];
  for await (const chunk of tts.synthesize(text, new AbortController().signal)) chunks.push(chunk);
  const total = chunks.reduce((n, c) => n + c.length, 0);
  const pcm = new Int16Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    pcm.set(chunk, offset);
    offset += chunk.length;
  }
  return resample(pcm, tts.sampleRate, 16000);
}

/** One second of a soft 100 Hz hum with a little noise. */
export function quietHum(): Int16Array {
  const pcm = new Int16Array(16_000);
  for (let i = 0; i < pcm.length; i++)
    pcm[i] = Math.round(600 * Math.sin((2 * Math.PI * 100 * i) / 16_000) + (Math.random() - 0.5) * 200);
  return pcm;
}

export function loopPcm(source: Int16Array, samples: number): Int16Array {
  const out = new Int16Array(samples);
  for (let i = 0; i < samples; i++) out[i] = source[i % source.length]!;
  return out;
}
