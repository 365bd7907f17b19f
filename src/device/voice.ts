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
