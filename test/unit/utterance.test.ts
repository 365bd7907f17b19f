// UtteranceDetector hysteresis with a scripted VAD model (the real Silero model is exercised by the audio
// e2e test). Each 512-sample window of test audio is filled with its own index, so the samples of an
// utterance show exactly which windows it contains.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_UTTERANCE_OPTIONS,
  UtteranceDetector,
  type UtteranceEvent,
  type UtteranceOptions,
  type VadModel,
} from '../../src/audio/utterance.js';

const WINDOW = 512;
const RATE = 16_000;
const msToSamples = (ms: number) => (ms * RATE) / 1000;

/** Returns the scripted probabilities in order, one per window; records which window it was shown. */
class ScriptedVad implements VadModel {
  readonly windowSamples = WINDOW;
  readonly seen: number[] = [];
  resets = 0;
  private next = 0;
  constructor(private readonly probabilities: number[]) {}
  probability(window: Float32Array): number {
    expect(window).toHaveLength(WINDOW);
    this.seen.push(Math.round(window[0]! * 32768));
    return this.probabilities[this.next++] ?? 0;
  }
  reset(): void {
    this.resets++;
  }
}

/** `count` windows; window k is filled with the value first + k. */
function windows(count: number, first = 0): Int16Array {
  const pcm = new Int16Array(count * WINDOW);
  for (let k = 0; k < count; k++) pcm.fill(first + k, k * WINDOW, (k + 1) * WINDOW);
  return pcm;
}

/** Window index of every sample of an utterance. */
const windowOf = (pcm: Int16Array) => Array.from(pcm);

/** A probability script from runs: [[0.1, 5], [0.9, 10]] → five 0.1 then ten 0.9. */
const script = (...runs: Array<[number, number]>) => runs.flatMap(([p, n]) => Array<number>(n).fill(p));

const TEST_OPTIONS: Partial<UtteranceOptions> = {
  prerollMs: 320, // exactly 10 windows
  silenceMs: 320, // 10 windows
  startWindows: 2,
  startThreshold: 0.5,
  endThreshold: 0.35,
  maxUtteranceMs: 20_000,
};

/** Pushes one window at a time; returns each event with the index of the window that produced it. */
async function perWindow(detector: UtteranceDetector, pcm: Int16Array) {
  const out: Array<{ at: number; event: UtteranceEvent }> = [];
  for (let k = 0; k * WINDOW < pcm.length; k++) {
    for (const event of await detector.push(pcm.subarray(k * WINDOW, (k + 1) * WINDOW))) {
      out.push({ at: k, event });
    }
  }
  return out;
}

/** Events with the audio as base64, so comparing long runs stays cheap. */
type Comparable = { type: string; forced?: boolean; pcm?: string | null };
const comparable = (event: UtteranceEvent): Comparable =>
  event.type === 'utterance'
    ? { type: event.type, forced: event.forced, pcm: base64(event.pcm) }
    : { type: event.type };
const base64 = (pcm: Int16Array | null) =>
  pcm === null ? null : Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');

async function inChunks(detector: UtteranceDetector, pcm: Int16Array, sizes: number[]) {
  const out: UtteranceEvent[] = [];
  let offset = 0;
  let k = 0;
  while (offset < pcm.length) {
    const size = sizes[k++ % sizes.length]!;
    out.push(...(await detector.push(pcm.subarray(offset, offset + size))));
    offset += size;
  }
  return out;
}

const utterances = (events: Array<{ at: number; event: UtteranceEvent }>) =>
  events.flatMap(({ at, event }) => (event.type === 'utterance' ? [{ at, ...event }] : []));
const starts = (events: Array<{ at: number; event: UtteranceEvent }>) =>
  events.filter(({ event }) => event.type === 'speech_start').map(({ at }) => at);

describe('speech start', () => {
  it.each([
    { name: 'two windows in a row start it', startWindows: 2, probs: [0.1, 0.9, 0.9, 0.9], start: 2 },
    { name: 'the start threshold is inclusive', startWindows: 2, probs: [0.5, 0.5], start: 1 },
    {
      name: 'alternating clicks never start it',
      startWindows: 2,
      probs: [0.9, 0.1, 0.9, 0.1, 0.9, 0.1],
      start: null,
    },
    {
      name: 'just under the threshold never starts it',
      startWindows: 2,
      probs: Array(20).fill(0.49),
      start: null,
    },
    { name: 'startWindows 1 starts at once', startWindows: 1, probs: [0.1, 0.6], start: 1 },
    {
      name: 'startWindows 3 needs three in a row',
      startWindows: 3,
      probs: [0.9, 0.9, 0.1, 0.9, 0.9, 0.9],
      start: 5,
    },
  ])('$name', async ({ startWindows, probs, start }) => {
    const detector = new UtteranceDetector(new ScriptedVad(probs), { ...TEST_OPTIONS, startWindows });
    const events = await perWindow(detector, windows(probs.length));
    expect(starts(events)).toEqual(start === null ? [] : [start]);
    expect(detector.speaking).toBe(start !== null);
  });
});

describe('speech end (hysteresis)', () => {
  it('ends after silenceMs of windows below endThreshold, on exactly the 10th silent window', async () => {
    const probs = script([0.1, 5], [0.9, 10], [0.1, 20]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), TEST_OPTIONS);
    const events = await perWindow(detector, windows(probs.length));
    expect(starts(events)).toEqual([6]);
    const ends = utterances(events);
    expect(ends.map((u) => u.at)).toEqual([15 + 10 - 1]);
    expect(ends[0]!.forced).toBe(false);
    expect(detector.speaking).toBe(false);
  });

  it.each([0.35, 0.4, 0.49])('probabilities between the thresholds (%f) never end it', async (between) => {
    const probs = script([0.9, 10], [between, 100]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), TEST_OPTIONS);
    const events = await perWindow(detector, windows(probs.length));
    expect(utterances(events)).toEqual([]);
    expect(detector.speaking).toBe(true);
  });

  it('a window between the thresholds restarts the silence count', async () => {
    const probs = script([0.9, 5], [0.1, 9], [0.4, 1], [0.1, 9], [0.1, 1], [0.1, 5]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), TEST_OPTIONS);
    const ends = utterances(await perWindow(detector, windows(probs.length)));
    // 9 silent, reset, then the 10th silent window after the reset (index 5 + 9 + 1 + 9) ends it.
    expect(ends.map((u) => u.at)).toEqual([5 + 9 + 1 + 9]);
  });

  it('uses silenceMs: 700 ms at 32 ms windows needs 22 silent windows', async () => {
    const probs = script([0.9, 5], [0.1, 40]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), { ...TEST_OPTIONS, silenceMs: 700 });
    const ends = utterances(await perWindow(detector, windows(probs.length)));
    expect(ends.map((u) => u.at)).toEqual([5 + 22 - 1]);
  });
});

describe('utterance audio', () => {
  it('starts prerollMs before the detection point and contains every window in order', async () => {
    // Windows 0-19 silence, 20-39 speech, then silence. Detection at window 21 (two above threshold).
    const probs = script([0.1, 20], [0.9, 20], [0.1, 20]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), TEST_OPTIONS);
    const events = await perWindow(detector, windows(probs.length));
    expect(starts(events)).toEqual([21]);
    const [utterance] = utterances(events);
    const samples = windowOf(utterance!.pcm);
    // 10 windows of pre-roll (320 ms) up to and including the detection window: 12..21.
    expect(samples[0]).toBe(12);
    const beforeDetection = (21 + 1 - samples[0]!) * WINDOW;
    expect(beforeDetection).toBe(msToSamples(320));
    // Audio before the first speech window (20) is kept, so the first syllable is not lost.
    expect(samples.filter((w) => w < 20).length).toBe(8 * WINDOW);
    // Contiguous: sample i belongs to window 12 + floor(i / 512).
    samples.forEach((w, i) => {
      if (w !== 12 + Math.floor(i / WINDOW)) throw new Error(`sample ${i} is from window ${w}`);
    });
  });

  it('with the default 600 ms pre-roll the utterance holds 600–632 ms before the detection point', async () => {
    const probs = script([0.1, 40], [0.9, 20], [0.1, 30]);
    const detector = new UtteranceDetector(new ScriptedVad(probs));
    const events = await perWindow(detector, windows(probs.length));
    const [start] = starts(events);
    const [utterance] = utterances(events);
    const before = (start! + 1 - utterance!.pcm[0]!) * WINDOW;
    expect(before).toBeGreaterThanOrEqual(msToSamples(DEFAULT_UTTERANCE_OPTIONS.prerollMs));
    expect(before).toBeLessThan(msToSamples(DEFAULT_UTTERANCE_OPTIONS.prerollMs) + WINDOW);
  });

  it('speech right at the beginning has only the audio there is as pre-roll', async () => {
    const probs = script([0.1, 3], [0.9, 10], [0.1, 12]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), TEST_OPTIONS);
    const [utterance] = utterances(await perWindow(detector, windows(probs.length)));
    expect(utterance!.pcm[0]).toBe(0);
  });

  it.each([
    [100, 4 * WINDOW], // ends after 4 silent windows (128 ms), all kept
    [320, msToSamples(200)],
    [700, msToSamples(200)],
    [1000, msToSamples(200)],
  ])('silenceMs %i: trailing silence kept is %i samples (≤ 200 ms)', async (silenceMs, trailing) => {
    const probs = script([0.1, 5], [0.9, 20], [0.1, 60]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), { ...TEST_OPTIONS, silenceMs });
    const [utterance] = utterances(await perWindow(detector, windows(probs.length)));
    const samples = windowOf(utterance!.pcm);
    const speechEnd = samples.lastIndexOf(24) + 1; // last speech window is 24
    expect(samples.length - speechEnd).toBe(trailing);
    expect(samples.length - speechEnd).toBeLessThanOrEqual(msToSamples(200));
  });
});

describe('maxUtteranceMs', () => {
  it('forces an end with forced=true and keeps going without losing audio', async () => {
    // 640 ms = 20 windows, pre-roll included.
    const probs = script([0.1, 5], [0.9, 100]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), { ...TEST_OPTIONS, maxUtteranceMs: 640 });
    const events = await perWindow(detector, windows(probs.length));
    const ends = utterances(events);
    expect(ends.length).toBeGreaterThanOrEqual(2);
    expect(ends.every((u) => u.forced)).toBe(true);
    expect(ends[0]!.pcm.length).toBe(msToSamples(640));
    expect(ends[0]!.at).toBe(19);
    // The next utterance restarts after two more speech windows and continues exactly where the first ended.
    expect(starts(events).slice(0, 2)).toEqual([6, 21]);
    expect(ends[1]!.pcm[0]).toBe(20);
    expect(ends[0]!.pcm[ends[0]!.pcm.length - 1]).toBe(19);
  });

  it('a normal end is not forced', async () => {
    const probs = script([0.9, 5], [0.1, 10]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), TEST_OPTIONS);
    const ends = utterances(await perWindow(detector, windows(probs.length)));
    expect(ends.map((u) => u.forced)).toEqual([false]);
  });
});

describe('flush and reset', () => {
  it('flush() during speech returns the partial utterance and ends it', async () => {
    const probs = script([0.1, 5], [0.9, 10], [0.1, 3]);
    const model = new ScriptedVad(probs);
    const detector = new UtteranceDetector(model, TEST_OPTIONS);
    await perWindow(detector, windows(probs.length));
    expect(detector.speaking).toBe(true);
    const pcm = detector.flush();
    expect(pcm).not.toBeNull();
    expect(pcm![0]).toBe(0);
    expect(pcm!.length).toBe(18 * WINDOW); // 3 silent windows (96 ms) are under the 200 ms kept
    expect(windowOf(pcm!)[pcm!.length - 1]).toBe(17);
    expect(detector.speaking).toBe(false);
    expect(model.resets).toBe(1);
    expect(detector.flush()).toBeNull();
  });

  it('flush() trims a long trailing silence to 200 ms', async () => {
    const probs = script([0.9, 5], [0.1, 9]);
    const detector = new UtteranceDetector(new ScriptedVad(probs), { ...TEST_OPTIONS, silenceMs: 1000 });
    await perWindow(detector, windows(probs.length));
    const pcm = detector.flush()!;
    expect(pcm.length).toBe(5 * WINDOW + msToSamples(200));
  });

  it('flush() outside speech returns null and drops the pre-roll', async () => {
    const probs = script([0.1, 10], [0.9, 2], [0.1, 12]);
    const model = new ScriptedVad(probs);
    const detector = new UtteranceDetector(model, TEST_OPTIONS);
    await detector.push(windows(10));
    expect(detector.flush()).toBeNull();
    const events = await perWindow(detector, windows(14, 10));
    const [utterance] = utterances(events);
    expect(utterance!.pcm[0]).toBe(10); // nothing from before the flush
  });

  it('flush() drops a pending partial window', async () => {
    const model = new ScriptedVad([]);
    const detector = new UtteranceDetector(model, TEST_OPTIONS);
    await detector.push(windows(2).subarray(0, 700)); // one window + 188 samples pending
    detector.flush();
    await detector.push(windows(1, 7));
    expect(model.seen).toEqual([0, 7]);
  });

  it('reset() abandons the utterance in progress, resets the model and starts over', async () => {
    const first = script([0.1, 3], [0.9, 6]);
    const second = script([0.1, 3], [0.9, 4], [0.1, 10]);
    const model = new ScriptedVad([...first, ...second]);
    const detector = new UtteranceDetector(model, TEST_OPTIONS);
    await detector.push(windows(first.length));
    await detector.push(windows(1, 100).subarray(0, 100)); // pending part of a window
    expect(detector.speaking).toBe(true);
    detector.reset();
    expect(detector.speaking).toBe(false);
    expect(model.resets).toBe(1);
    const events = await perWindow(detector, windows(second.length, 200));
    expect(model.seen.slice(first.length)).toEqual(Array.from({ length: second.length }, (_, k) => 200 + k));
    const [utterance] = utterances(events);
    expect(utterance!.pcm[0]).toBe(200);
    expect(Math.min(...utterance!.pcm)).toBeGreaterThanOrEqual(200);
  });
});

describe('chunking', () => {
  // Several utterances, a forced end, clicks and a partial window at the end.
  const probs = script(
    [0.1, 12],
    [0.9, 1],
    [0.1, 4],
    [0.8, 15],
    [0.4, 6],
    [0.1, 14],
    [0.9, 40],
    [0.2, 12],
    [0.7, 3],
    [0.1, 3],
  );
  const audio = windows(probs.length).subarray(0, probs.length * WINDOW - 300);
  const options = { ...TEST_OPTIONS, maxUtteranceMs: 1000 };

  async function reference() {
    const model = new ScriptedVad(probs);
    const detector = new UtteranceDetector(model, options);
    const events = await inChunks(detector, audio, [WINDOW]);
    return { events, seen: model.seen, tail: detector.flush() };
  }

  async function run(sizes: number[]) {
    const model = new ScriptedVad(probs);
    const detector = new UtteranceDetector(model, options);
    const events = (await inChunks(detector, audio, sizes)).map(comparable);
    return { events, seen: model.seen, tail: base64(detector.flush()) };
  }

  it('the reference run has utterances, a forced one and a flushable tail', async () => {
    const { events, tail } = await reference();
    const ends = events.filter((e) => e.type === 'utterance');
    expect(ends.length).toBeGreaterThanOrEqual(3);
    expect(ends.some((e) => e.type === 'utterance' && e.forced)).toBe(true);
    expect(tail).not.toBeNull();
  });

  it.each([[[960]], [[100]], [[1]], [[4096]], [[511, 513]], [[audio.length]]])(
    'chunks of %j give the same events as whole windows',
    async (sizes) => {
      expect(await run(sizes)).toEqual(await run([WINDOW]));
    },
  );

  it('random chunkings (fast-check) give the same events', async () => {
    const expected = await run([WINDOW]);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 12 }),
        async (sizes) => {
          expect(await run(sizes)).toEqual(expected);
        },
      ),
      { numRuns: 40 },
    );
  });
});
