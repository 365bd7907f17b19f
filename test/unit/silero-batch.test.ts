// The shared Silero batcher must give every stream exactly what it would get alone: same probabilities, its own
// recurrent state, whatever else is in the batch.
import { describe, expect, it } from 'vitest';
import { SileroVad, sileroBatcher } from '../../src/audio/silero.js';

const WINDOW = 512;

/** A deterministic test signal per stream: a voiced-like harmonic burst in some windows, low noise in others. */
function signal(stream: number, windows: number): Float32Array[] {
  let seed = 1234 + stream * 7919;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648 - 0.5;
  };
  return Array.from({ length: windows }, (_, w) => {
    const voiced = (w + stream) % 12 < 7;
    const f0 = 110 + stream * 13;
    return Float32Array.from({ length: WINDOW }, (_, i) => {
      const t = (w * WINDOW + i) / 16_000;
      const harmonics = voiced
        ? 0.3 * Math.sin(2 * Math.PI * f0 * t) +
          0.2 * Math.sin(4 * Math.PI * f0 * t) +
          0.1 * Math.sin(6 * Math.PI * f0 * t)
        : 0;
      return harmonics + 0.01 * random();
    });
  });
}

describe('Silero batcher', () => {
  it('batched windows of many streams equal the same streams run one window at a time', async () => {
    const streams = 12;
    const windows = 40;
    const audio = Array.from({ length: streams }, (_, s) => signal(s, windows));

    // Alone: one stream at a time, one window at a time (batches of one).
    const alone: number[][] = [];
    for (let s = 0; s < streams; s++) {
      const vad = await SileroVad.create();
      const probabilities: number[] = [];
      for (const window of audio[s]!) probabilities.push(await vad.probability(window));
      alone.push(probabilities);
    }

    // Together: every stream's next window in the same turn, so they share a batch.
    const batcher = await sileroBatcher();
    const largestBefore = batcher.stats.largestBatch;
    const vads = await Promise.all(Array.from({ length: streams }, () => SileroVad.create()));
    const together: number[][] = vads.map(() => []);
    for (let w = 0; w < windows; w++) {
      const results = await Promise.all(vads.map((vad, s) => vad.probability(audio[s]![w]!)));
      for (const [s, p] of results.entries()) together[s]!.push(p);
    }

    expect(Math.max(largestBefore, batcher.stats.largestBatch)).toBeGreaterThanOrEqual(streams);
    for (let s = 0; s < streams; s++) {
      for (let w = 0; w < windows; w++) expect(together[s]![w]!).toBeCloseTo(alone[s]![w]!, 4);
    }
    // The signal is not trivial: some windows look like speech and some do not.
    const all = alone.flat();
    expect(Math.max(...all) - Math.min(...all)).toBeGreaterThan(0.2);
  });

  it('reset() gives a stream a fresh state', async () => {
    const vad = await SileroVad.create();
    const audio = signal(3, 20);
    const first: number[] = [];
    for (const window of audio) first.push(await vad.probability(window));
    vad.reset();
    const second: number[] = [];
    for (const window of audio) second.push(await vad.probability(window));
    for (const [i, p] of second.entries()) expect(p).toBeCloseTo(first[i]!, 5);
  });
});
