// Capacity without WebSockets: N Opus decoders and N Silero VAD streams (as the server builds them) fed
// the same packets as fast as they go. CPU per second of audio per stream → streams per core.
import { OpusPacketDecoder } from '../src/audio/opus.js';
import { SileroVad } from '../src/audio/silero.js';
import { UtteranceDetector } from '../src/audio/utterance.js';
import { serverUtteranceOptions, type Utterance } from './audio.js';
import { cpuMs } from './latency.js';
import { fmt, heading, printTable } from './stats.js';

export interface CapacityOptions {
  streams: number;
  audioSec: number;
  utterance: Utterance;
  dataDir: string;
}

export async function runCapacity(options: CapacityOptions): Promise<void> {
  const { streams, audioSec, utterance } = options;
  heading(`Capacity: decode + VAD of ${streams} streams × ${audioSec} s of audio, in-process, no WebSocket`);
  const loops = Math.max(1, Math.round((audioSec * 1000) / utterance.totalMs));
  const packets = Array.from({ length: loops }, () => utterance.packets).flat();
  const seconds = (packets.length * 60) / 1000;
  const streamSeconds = streams * seconds;

  // 1. Opus decode, every stream its own decoder (state matters); keep stream 0's PCM for the VAD pass.
  const decoders = Array.from({ length: streams }, () => new OpusPacketDecoder(16_000));
  const pcm: Int16Array[] = [];
  let cpu = process.cpuUsage();
  let wall = performance.now();
  for (const packet of packets) {
    for (const [i, decoder] of decoders.entries()) {
      const out = decoder.decode(packet);
      if (i === 0 && out) pcm.push(out);
    }
  }
  const decode = { cpuMs: cpuMs(process.cpuUsage(cpu)), wallMs: performance.now() - wall };

  // 2. Silero VAD + utterance detection, every stream its own state; concurrent like the server's devices.
  const utteranceOptions = serverUtteranceOptions(options.dataDir);
  const detectors = await Promise.all(
    Array.from(
      { length: streams },
      async () => new UtteranceDetector(await SileroVad.create(), utteranceOptions),
    ),
  );
  await detectors[0]!.push(pcm[0]!); // warm the model
  detectors[0]!.reset();
  let found = 0;
  cpu = process.cpuUsage();
  wall = performance.now();
  for (const chunk of pcm) {
    const events = await Promise.all(detectors.map((d) => d.push(chunk)));
    for (const list of events) found += list.filter((e) => e.type === 'utterance').length;
  }
  const vad = { cpuMs: cpuMs(process.cpuUsage(cpu)), wallMs: performance.now() - wall };

  const perSec = (ms: number) => ms / streamSeconds;
  const total = perSec(decode.cpuMs) + perSec(vad.cpuMs);
  const row = (label: string, cpuPerSec: number, wallMs: number): string[] => [
    label,
    fmt(cpuPerSec, 3),
    fmt((100 * cpuPerSec) / 1000, 3),
    fmt(1000 / cpuPerSec, 0),
    fmt((streamSeconds * 1000) / wallMs, 0),
  ];
  printTable([
    ['stage', 'CPU ms per s of audio', '% core/stream', 'streams/core', 'x real time (wall)'],
    row('Opus decode 16 kHz', perSec(decode.cpuMs), decode.wallMs),
    row('Silero VAD + utterance cut', perSec(vad.cpuMs), vad.wallMs),
    row('decode + VAD', total, decode.wallMs + vad.wallMs),
  ]);
  const windows = Math.floor((seconds * 16_000) / 512) * streams;
  console.log(
    `\n  ${fmt(streamSeconds, 0)} s of audio in all (${loops} × the utterance per stream); ` +
      `${fmt((vad.cpuMs * 1000) / windows, 1)} µs CPU per 32 ms VAD window; ` +
      `utterances found ${found} (${loops * streams} expected)`,
  );
  console.log(
    `  target ≥ 200 streaming devices per core for decode + VAD: ${1000 / total >= 200 ? 'ok' : 'MISS'}`,
  );
}
