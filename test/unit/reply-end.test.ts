// The end of a reply (DESIGN §4; issue 12): trailing silence so a client that schedules audio only while it
// holds 240 ms (the xiaozhi-esp32-server test page) plays every speech frame before `tts stop` flushes it, and
// `tts stop` a margin after the estimated end of the speech, later by what late frames hid from the estimate
// (Pacer.takeLateness). Real Opus and a real pacer on a clock driven by hand.
import { describe, expect, it } from 'vitest';
import { type HeardReply, playLikeTestPage } from '../../bench/flush-client.js';
import { OpusPacketDecoder } from '../../src/audio/opus.js';
import { Pacer } from '../../src/audio/pacer.js';
import type { ServerFrame } from '../../src/protocol/index.js';
import type { TtsProvider } from '../../src/providers/tts/types.js';
import { SpeechOut } from '../../src/voice/speech-out.js';
import { ManualClock } from '../support/fake-clock.js';

const RATE = 24_000;
const FRAME = 1440; // 60 ms at 24 kHz

/** A loud tone, `frames` whole 60 ms frames long (so the encoder's flush adds no frame). */
function tone(frames: number): Int16Array {
  const pcm = new Int16Array(frames * FRAME);
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * 300 * i) / RATE));
  return pcm;
}

const ttsOf = (pcm: Int16Array): TtsProvider => ({
  name: 'test-tts',
  sampleRate: RATE,
  async *synthesize() {
    yield pcm;
  },
  describe: () => 'test tts',
});

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A pacer on a hand-driven clock; `frames` queues numbered frames of a reply. */
function paced() {
  const clock = new ManualClock();
  const pacer = new Pacer({ clock, sendAudio: () => {} });
  const frames = (replyId: number, count: number) => {
    for (let i = 0; i < count; i++) pacer.enqueueAudio(replyId, new Uint8Array([i]));
  };
  return { clock, pacer, frames };
}

interface Case {
  name: string;
  speechFrames: number;
  tailSilenceMs?: number;
  stopMarginMs: number;
  stallMarginMs?: number;
  /** The event loop is stuck from `atMs` for `ms` (no timer fires), as under CPU load. */
  stuck?: { atMs: number; ms: number };
  silenceFrames: number;
  stopAtMs: number;
}

async function speakAndFinish(c: Case, abort?: 'before' | 'margin') {
  const clock = new ManualClock();
  const packets: Uint8Array[] = [];
  const sentAt: number[] = [];
  const frames: Array<{ frame: ServerFrame; at: number }> = [];
  const pacer = new Pacer({
    clock,
    sendAudio: (packet) => {
      packets.push(packet);
      sentAt.push(clock.now());
    },
  });
  const controller = new AbortController();
  const speech = new SpeechOut({
    sink: {
      sessionId: 's1',
      sendJson: (frame) => {
        frames.push({ frame, at: clock.now() });
        return true;
      },
    },
    tts: ttsOf(tone(c.speechFrames)),
    pacer,
    replyId: 1,
    signal: controller.signal,
    sampleRate: RATE,
    frameMs: 60,
    stopMarginMs: c.stopMarginMs,
    ...(c.tailSilenceMs !== undefined ? { tailSilenceMs: c.tailSilenceMs } : {}),
    ...(c.stallMarginMs !== undefined ? { stallMarginMs: c.stallMarginMs } : {}),
    now: () => clock.now(),
  });
  await speech.speakVerbatim('Hello there.');
  if (abort === 'before') controller.abort();
  const finished = speech.finish();
  const stopped = () => frames.some((f) => f.frame.type === 'tts' && f.frame.state === 'stop');
  let stuck = c.stuck;
  while (!stopped() && clock.now() < 10_000) {
    await settle();
    if (stuck && clock.now() >= stuck.atMs) {
      clock.time += stuck.ms;
      stuck = undefined;
    }
    if (abort === 'margin' && pacer.queuedItems === 0 && packets.length > 0) controller.abort();
    clock.advance(10);
  }
  await finished;
  const stop = frames.find((f) => f.frame.type === 'tts' && f.frame.state === 'stop');
  return { packets, sentAt, stopAt: stop?.at };
}

function peaks(packets: Uint8Array[]): number[] {
  const decoder = new OpusPacketDecoder(RATE);
  return packets.map((packet) => {
    let peak = 0;
    for (const sample of decoder.decode(packet) ?? []) peak = Math.max(peak, Math.abs(sample));
    return peak;
  });
}

describe('SpeechOut.finish', () => {
  // Speech frames leave 5 at once, then one per 60 ms: 20 frames end (estimated) at 1200 ms.
  const cases: Case[] = [
    {
      name: 'default tail (240 ms = 4 frames), 400 ms margin',
      speechFrames: 20,
      stopMarginMs: 400,
      silenceFrames: 4,
      stopAtMs: 1600,
    },
    {
      name: 'no tail: stop 400 ms after the speech, as before',
      speechFrames: 20,
      tailSilenceMs: 0,
      stopMarginMs: 400,
      silenceFrames: 0,
      stopAtMs: 1600,
    },
    {
      name: 'the tail is whole frames (200 → 4), and still inside the margin',
      speechFrames: 20,
      tailSilenceMs: 200,
      stopMarginMs: 400,
      silenceFrames: 4,
      stopAtMs: 1600,
    },
    {
      name: 'a margin shorter than the tail (no stall margin): the stop counts from the speech, not the silence',
      speechFrames: 20,
      stopMarginMs: 100,
      stallMarginMs: 0,
      silenceFrames: 4,
      stopAtMs: 1300,
    },
    {
      name: 'a margin shorter than the stall margin: the stall margin (300) is the floor',
      speechFrames: 20,
      stopMarginMs: 100,
      silenceFrames: 4,
      stopAtMs: 1500,
    },
    {
      name: 'a reply shorter than the pre-buffer',
      speechFrames: 3,
      stopMarginMs: 400,
      silenceFrames: 4,
      stopAtMs: 580,
    },
    {
      name: 'a frame 100 ms late (stuck 110 → 220): 100 + 300 stall margin is no more than the margin',
      speechFrames: 20,
      stopMarginMs: 400,
      stuck: { atMs: 110, ms: 110 },
      silenceFrames: 4,
      stopAtMs: 1600,
    },
    {
      name: 'a frame 200 ms late (stuck 110 → 320): 200 + 300 beats the 400 ms margin',
      speechFrames: 20,
      stopMarginMs: 400,
      stuck: { atMs: 110, ms: 210 },
      silenceFrames: 4,
      stopAtMs: 1700,
    },
    {
      // The frame due at 120 leaves at 520: the estimate ran dry and restarted (speech ends 1360); the 240 ms
      // the device's buffer hid, plus the 300 ms stall margin: 1360 + 540.
      name: 'a frame 400 ms late: the estimate takes the gap, the stall margin adds the pre-buffer depth',
      speechFrames: 20,
      stopMarginMs: 400,
      stuck: { atMs: 110, ms: 410 },
      silenceFrames: 4,
      stopAtMs: 1900,
    },
    {
      name: 'the same with no stall margin: the 400 ms margin alone',
      speechFrames: 20,
      stopMarginMs: 400,
      stallMarginMs: 0,
      stuck: { atMs: 110, ms: 410 },
      silenceFrames: 4,
      stopAtMs: 1760,
    },
  ];

  it.each(cases)('$name', async (c) => {
    const { packets, stopAt } = await speakAndFinish(c);
    expect(packets).toHaveLength(c.speechFrames + c.silenceFrames);
    expect(stopAt).toBe(c.stopAtMs);
    const loud = peaks(packets);
    expect(loud.slice(0, c.speechFrames).every((peak) => peak > 2000)).toBe(true);
    // The first silent packet still carries the end of the speech (Opus look-ahead); the rest are silent.
    expect(loud.slice(c.speechFrames + 1).every((peak) => peak <= 8)).toBe(true);
  });

  // The abort path sends its own `tts stop` at once; finish must not send a second one.
  it.each([
    { when: 'before' as const, name: 'aborted before finish: no silence, no stop', packets: 10 },
    { when: 'margin' as const, name: 'aborted during the margin: the silence went, no stop', packets: 14 },
  ])('$name', async ({ when, packets }) => {
    const c = { name: '', speechFrames: 10, stopMarginMs: 400, silenceFrames: 0, stopAtMs: 0 };
    const out = await speakAndFinish(c, when);
    expect(out.packets).toHaveLength(packets);
    expect(out.stopAt).toBeUndefined();
  });
});

describe('the test page (bench/flush-client.ts model) hears every reply to the end', () => {
  /** The reply as the page hears it, `atMs` later: the look-ahead frame after the speech counts as speech. */
  async function heard(speechFrames: number, tailSilenceMs: number, atMs: number): Promise<HeardReply> {
    const c = { name: '', speechFrames, tailSilenceMs, stopMarginMs: 400, silenceFrames: 0, stopAtMs: 0 };
    const { sentAt, stopAt } = await speakAndFinish(c);
    return {
      frames: sentAt.map((sent, i) => ({ atMs: atMs + sent, durationMs: 60, speech: i <= speechFrames })),
      stopAtMs: atMs + stopAt!,
    };
  }

  // Every reply length modulo the page's 4-frame schedule unit, as the first reply of a page and a later one.
  const lengths = [20, 21, 22, 23];
  const lostMs = async (tailSilenceMs: number) => {
    const lost: number[] = [];
    for (const frames of lengths) {
      const session = [await heard(frames, tailSilenceMs, 0), await heard(frames, tailSilenceMs, 5_000)];
      lost.push(...playLikeTestPage(session).map((o) => o.lostMs));
    }
    return lost;
  };

  it('with the default tail, nothing is lost', async () => {
    expect(await lostMs(240)).toEqual(Array(8).fill(0));
  });

  it('without it, the page drops the last < 240 ms it holds on tts stop: 0 to 180 ms by length', async () => {
    // [first, later] reply of 20, 21, 22, 23 frames.
    expect(await lostMs(0)).toEqual([120, 0, 180, 60, 0, 120, 60, 180]);
  });
});

describe('Pacer.takeLateness', () => {
  /** Runs 20 frames of reply 1; the event loop is stuck `blocks` ([from, ms]) times, as under CPU load. */
  function lateness(blocks: Array<[number, number]>) {
    const { clock, frames, pacer } = paced();
    frames(1, 20);
    const pending = [...blocks];
    while (pacer.queuedFrames > 0) {
      const block = pending[0];
      if (block && clock.now() >= block[0]) {
        clock.time += block[1]; // no timer fires while stuck; the overdue ones fire late on the next advance
        pending.shift();
      }
      clock.advance(10);
    }
    return pacer;
  }

  // Timers are due at 60, 120, 180, …: a loop stuck over one of them sends that frame late.
  it.each([
    { name: 'on time', blocks: [] as Array<[number, number]>, expected: 0 },
    { name: 'stuck 110 → 220: the frame due at 120 leaves at 220', blocks: [[110, 110]], expected: 100 },
    { name: 'stuck 110 → 170', blocks: [[110, 60]], expected: 50 },
    {
      name: 'the largest lateness, not the sum (50 then 80)',
      blocks: [
        [110, 60],
        [350, 90],
      ],
      expected: 80,
    },
    {
      name: 'capped at the pre-buffer depth (240): beyond it the estimate saw the gap',
      blocks: [[110, 410]],
      expected: 240,
    },
  ])('$name', ({ blocks, expected }) => {
    expect(lateness(blocks as Array<[number, number]>).takeLateness(1)).toBe(expected);
  });

  it('beyond the cap, the estimate itself moved by the rest', () => {
    const onTime = lateness([]).playoutEndsAt;
    const stuck = lateness([[110, 410]]);
    // The frame due at 120 left at 520: 400 late, 240 hidden by the device's buffer, 160 in the estimate.
    expect(stuck.playoutEndsAt - onTime).toBe(160);
  });

  it('is per reply, and forgotten once taken or dropped', () => {
    const { clock, frames, pacer } = paced();
    frames(1, 8);
    frames(2, 8);
    clock.advance(110);
    clock.time += 110; // reply 1's frame due at 120 leaves at 220
    clock.advance(2_000);
    expect(pacer.takeLateness(2)).toBe(0);
    expect(pacer.takeLateness(1)).toBe(100);
    expect(pacer.takeLateness(1)).toBe(0);

    frames(3, 8);
    clock.advance(50);
    clock.time += 100;
    clock.advance(10);
    pacer.drop(3);
    expect(pacer.takeLateness(3)).toBe(0);
  });
});
