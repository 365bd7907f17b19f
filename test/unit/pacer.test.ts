// Downlink pacing (DESIGN §4): at most ~5 frames ahead of the device's playout, then one frame per 60 ms,
// on a clock we drive by hand. The device queue holds 40 packets and silently drops the rest, so the
// pacer must never get near that, however the producer bursts or pauses.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Pacer, type PacerOptions } from '../../src/audio/pacer.js';
import { ManualClock } from '../support/fake-clock.js';

/**
 * The device side: every packet received joins its playout queue, which plays one 60 ms frame at a time.
 * Computed here independently of the pacer's own bookkeeping.
 */
class DeviceModel {
  private playoutEnd = 0;
  maxAheadMs = 0;
  constructor(private readonly clock: ManualClock) {}
  receive(): void {
    const now = this.clock.now();
    this.playoutEnd = Math.max(this.playoutEnd, now) + 60;
    this.maxAheadMs = Math.max(this.maxAheadMs, this.aheadMs());
  }
  aheadMs(): number {
    return Math.max(0, this.playoutEnd - this.clock.now());
  }
  /** Frames in the device's queue, counting the one playing. */
  queued(): number {
    return Math.ceil(this.aheadMs() / 60);
  }
}

type LogEntry = { what: string; replyId: number; at: number };

function setup(options: Partial<PacerOptions> = {}) {
  const clock = new ManualClock();
  const device = new DeviceModel(clock);
  const log: LogEntry[] = [];
  const pacer = new Pacer({
    clock,
    sendAudio: (packet, replyId) => {
      device.receive();
      log.push({ what: new TextDecoder().decode(packet), replyId, at: clock.now() });
    },
    ...options,
  });
  const audio = (replyId: number, name: string) =>
    pacer.enqueueAudio(replyId, new TextEncoder().encode(name));
  const control = (replyId: number, name: string) =>
    pacer.enqueueControl(replyId, () => log.push({ what: name, replyId, at: clock.now() }));
  const frames = (replyId: number, count: number, prefix = `r${replyId}-`) => {
    for (let i = 0; i < count; i++) audio(replyId, `${prefix}${i}`);
  };
  return { clock, device, log, pacer, audio, control, frames };
}

/** Lets resolved promises run (the fake clock does not use real timers, so this cannot fire them). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('Pacer timing', () => {
  it('sends the first 5 frames at once, then exactly one per 60 ms', () => {
    const { clock, log, frames } = setup();
    frames(1, 20);
    // The pre-buffer leaves inside enqueue itself: no timer hop on the first-audio path.
    expect(log.map((e) => e.at)).toEqual([0, 0, 0, 0, 0]);
    for (let k = 1; k <= 15; k++) {
      clock.advance(59);
      expect(log).toHaveLength(4 + k);
      clock.advance(1);
      expect(log).toHaveLength(5 + k);
      expect(log[log.length - 1]!.at).toBe(60 * k);
    }
    expect(log.map((e) => e.what)).toEqual(Array.from({ length: 20 }, (_, i) => `r1-${i}`));
    clock.advance(10_000);
    expect(log).toHaveLength(20);
  });

  it('after a long producer gap the device is empty again: 5 at once, then one per 60 ms', () => {
    const { clock, log, frames, device } = setup();
    frames(1, 10);
    clock.advance(2_000); // all sent by t=300 and played by t=600
    expect(log).toHaveLength(10);
    expect(device.aheadMs()).toBe(0);
    const before = log.length;
    frames(2, 10);
    clock.advance(0);
    expect(log.length - before).toBe(5);
    clock.advance(60);
    expect(log.length - before).toBe(6);
    expect(device.queued()).toBeLessThanOrEqual(5);
  });

  it('after a short gap it only tops the pre-buffer up to 5 frames ahead', () => {
    const { clock, log, frames, device } = setup();
    frames(1, 6);
    clock.advance(60); // 5 at t=0, 1 at t=60 → the device has played up to t=360
    expect(log).toHaveLength(6);
    clock.advance(140); // t=200: 160 ms (2.7 frames) still to play
    expect(device.aheadMs()).toBe(160);
    frames(1, 5, 'more-');
    clock.advance(0);
    expect(log.map((e) => e.what).slice(6)).toEqual(['more-0', 'more-1']); // 160 → 220 → 280 ms ahead
    expect(device.aheadMs()).toBe(280);
    expect(device.queued()).toBeLessThanOrEqual(5);
  });

  it('200 queued frames (12 s): never more than 5 frames (300 ms) ahead, so never near 40 frames / 2.4 s', () => {
    const { clock, log, frames, device, pacer } = setup();
    frames(1, 200);
    for (let t = 0; t <= 13_000; t += 7) {
      clock.advance(7);
      expect(device.aheadMs()).toBeLessThanOrEqual(300);
      expect(device.queued()).toBeLessThan(40);
    }
    expect(log).toHaveLength(200);
    expect(device.maxAheadMs).toBe(300);
    expect(pacer.framesSent).toBe(200);
    expect(pacer.queuedFrames).toBe(0);
  });

  it('respects frameMs and prebufferFrames options', () => {
    const { clock, log, frames } = setup({ frameMs: 20, prebufferFrames: 3 });
    frames(1, 6);
    clock.advance(0);
    expect(log).toHaveLength(3);
    clock.advance(20);
    expect(log).toHaveLength(4);
    clock.advance(40);
    expect(log.map((e) => e.at)).toEqual([0, 0, 0, 20, 40, 60]);
  });

  it('random producer bursts and pauses (fast-check): ≤ 5 ahead, full pre-buffer while backlogged, in order', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('enqueue' as const), count: fc.integer({ min: 1, max: 30 }) }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 700 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 60 }), (ops) => {
        const { clock, log, audio, device, pacer } = setup();
        let enqueued = 0;
        for (const o of ops) {
          if (o.kind === 'enqueue') {
            for (let i = 0; i < o.count; i++) audio(1, String(enqueued++));
          } else {
            clock.advance(o.ms);
          }
          expect(device.maxAheadMs).toBeLessThanOrEqual(300);
          // While frames wait, the device is kept topped up (more than 4 frames ahead).
          if (o.kind === 'advance' && pacer.queuedFrames > 0) expect(device.aheadMs()).toBeGreaterThan(240);
        }
        clock.advance(60 * enqueued + 60);
        expect(log.map((e) => e.what)).toEqual(Array.from({ length: enqueued }, (_, i) => String(i)));
        expect(device.maxAheadMs).toBeLessThanOrEqual(300);
      }),
      { numRuns: 200 },
    );
  });
});

describe('Pacer control items', () => {
  it('are delivered in queue order, between the audio frames around them', () => {
    const { clock, log, frames, audio, control } = setup();
    frames(1, 7); // a0..a6
    control(1, 'c1');
    audio(1, 'a7');
    control(1, 'c2');
    control(1, 'c3');
    audio(1, 'a8');
    clock.advance(0);
    expect(log.map((e) => e.what)).toEqual(['r1-0', 'r1-1', 'r1-2', 'r1-3', 'r1-4']);
    clock.advance(60);
    expect(log.map((e) => e.what).slice(5)).toEqual(['r1-5']); // c1 waits for r1-6
    clock.advance(1_000);
    expect(log.map((e) => e.what)).toEqual([
      'r1-0',
      'r1-1',
      'r1-2',
      'r1-3',
      'r1-4',
      'r1-5',
      'r1-6',
      'c1',
      'a7',
      'c2',
      'c3',
      'a8',
    ]);
    const at = Object.fromEntries(log.map((e) => [e.what, e.at]));
    expect(at.c1).toBe(at['r1-6']); // right after the frame before it, not before
    expect(at.c2).toBe(at.a7);
    expect(at.c3).toBe(at.a7);
    expect(at.a8).toBe(at.a7! + 60);
  });

  it('a control item with no audio ahead of it goes out at once', () => {
    const { clock, log, control } = setup();
    control(1, 'sentence_start');
    clock.advance(0);
    expect(log).toEqual([{ what: 'sentence_start', replyId: 1, at: 0 }]);
  });

  it('control items do not count as audio frames', () => {
    const { pacer, control, audio, frames } = setup();
    frames(1, 5); // fill the pre-buffer so later items stay queued
    control(1, 'c');
    audio(1, 'a');
    expect(pacer.queuedFrames).toBe(1);
    expect(pacer.hasQueued(1)).toBe(true);
  });
});

describe('Pacer.drop', () => {
  it("removes only that reply's items; nothing of it is sent afterwards", () => {
    const { clock, log, frames, control, pacer } = setup();
    frames(1, 8);
    control(1, 'c-r1');
    frames(1, 2, 'late-');
    frames(2, 6);
    control(2, 'c-r2');
    clock.advance(0);
    expect(log).toHaveLength(5);
    expect(pacer.queuedFrames).toBe(3 + 2 + 6);

    pacer.drop(1);
    expect(pacer.hasQueued(1)).toBe(false);
    expect(pacer.hasQueued(2)).toBe(true);
    expect(pacer.queuedFrames).toBe(6);

    clock.advance(5_000);
    const after = log.slice(5);
    expect(after.every((e) => e.replyId === 2)).toBe(true);
    expect(after.map((e) => e.what)).toEqual(['r2-0', 'r2-1', 'r2-2', 'r2-3', 'r2-4', 'r2-5', 'c-r2']);
  });

  it('forgets the dropped playout: the next reply starts with a fresh pre-buffer', () => {
    const { clock, log, frames, pacer } = setup();
    frames(1, 10);
    clock.advance(0);
    expect(pacer.playoutEndsAt).toBe(300);
    pacer.drop(1); // the device flushes its queue on tts stop
    expect(pacer.playoutEndsAt).toBe(0);
    frames(2, 10);
    // The new reply gets a full pre-buffer at once, as if the device were empty.
    clock.advance(0);
    const second = log.filter((e) => e.replyId === 2);
    expect(second).toHaveLength(5);
    expect(second.every((e) => e.at === 0)).toBe(true);
  });

  it('dropping one reply leaves the other reply queued before and after it intact', () => {
    const { clock, log, frames, pacer } = setup();
    frames(0, 5, 'pre-'); // fill the pre-buffer so the rest stays queued
    frames(1, 2, 'first-');
    frames(2, 3);
    frames(1, 2, 'second-');
    pacer.drop(2);
    clock.advance(1_000);
    expect(log.map((e) => e.what)).toEqual([
      'pre-0',
      'pre-1',
      'pre-2',
      'pre-3',
      'pre-4',
      'first-0',
      'first-1',
      'second-0',
      'second-1',
    ]);
  });
});

describe('Pacer.playoutEndsAt', () => {
  it('is when the device will have played everything sent, and never earlier than now', () => {
    const { clock, frames, pacer } = setup();
    expect(pacer.playoutEndsAt).toBe(0);
    frames(1, 7);
    clock.advance(0);
    expect(pacer.playoutEndsAt).toBe(300);
    clock.advance(120); // two more sent at 60 and 120
    expect(pacer.playoutEndsAt).toBe(420);
    clock.advance(1_000);
    expect(pacer.playoutEndsAt).toBe(clock.now());
  });
});

describe('Pacer.waitForRoom', () => {
  it('blocks at maxQueuedFrames and resumes once frames are sent', async () => {
    const { clock, frames, pacer } = setup({ maxQueuedFrames: 10 });
    frames(1, 14); // 5 leave at once, 9 stay queued
    let resolved = false;
    await pacer.waitForRoom();
    frames(1, 1, 'tenth-');
    expect(pacer.queuedFrames).toBe(10);
    void pacer.waitForRoom().then(() => {
      resolved = true;
    });
    await settle();
    expect(resolved).toBe(false);
    clock.advance(60); // one more frame leaves the queue
    await settle();
    expect(resolved).toBe(true);
    expect(pacer.queuedFrames).toBe(9);
  });

  it('a producer using waitForRoom never has more than maxQueuedFrames queued', async () => {
    const { clock, log, pacer, audio } = setup({ maxQueuedFrames: 4 });
    let maxQueued = 0;
    const producer = (async () => {
      for (let i = 0; i < 30; i++) {
        await pacer.waitForRoom();
        audio(1, String(i));
        maxQueued = Math.max(maxQueued, pacer.queuedFrames);
      }
    })();
    for (let i = 0; i < 60; i++) {
      await settle();
      clock.advance(60);
    }
    await producer;
    clock.advance(1_000);
    expect(maxQueued).toBeLessThanOrEqual(4);
    expect(log.map((e) => e.what)).toEqual(Array.from({ length: 30 }, (_, i) => String(i)));
  });

  it('drop frees room for waiting producers', async () => {
    const { frames, pacer } = setup({ maxQueuedFrames: 3 });
    frames(1, 8); // 5 leave at once, 3 stay queued
    let resolved = false;
    void pacer.waitForRoom().then(() => {
      resolved = true;
    });
    await settle();
    expect(resolved).toBe(false);
    pacer.drop(1);
    await settle();
    expect(resolved).toBe(true);
  });
});

describe('Pacer.drained', () => {
  it("resolves when the reply's items are all sent, not before", async () => {
    const { clock, frames, control, pacer } = setup();
    frames(1, 8);
    control(1, 'last');
    frames(2, 3);
    let drained = false;
    void pacer.drained(1).then(() => {
      drained = true;
    });
    clock.advance(0);
    await settle();
    expect(drained).toBe(false);
    clock.advance(120); // r1-5, r1-6
    await settle();
    expect(drained).toBe(false);
    clock.advance(60); // r1-7 and the control item after it
    await settle();
    expect(drained).toBe(true);
    expect(pacer.hasQueued(2)).toBe(true);
  });

  it('resolves at once for a reply with nothing queued, and on drop', async () => {
    const { frames, pacer } = setup();
    await pacer.drained(7);
    frames(1, 8); // 5 leave at once, 3 stay queued
    let drained = false;
    void pacer.drained(1).then(() => {
      drained = true;
    });
    await settle();
    expect(drained).toBe(false);
    pacer.drop(1);
    await settle();
    expect(drained).toBe(true);
  });
});

describe('Pacer.close', () => {
  it('discards the queue, cancels its timer, wakes waiters and sends nothing more', async () => {
    const { clock, log, frames, control, pacer } = setup({ maxQueuedFrames: 10 });
    frames(1, 10);
    control(1, 'never');
    clock.advance(0);
    expect(log).toHaveLength(5);
    frames(1, 5, 'x-');
    let roomResolved = false;
    let drainedResolved = false;
    void pacer.waitForRoom().then(() => {
      roomResolved = true;
    });
    void pacer.drained(1).then(() => {
      drainedResolved = true;
    });
    await settle();
    expect(roomResolved).toBe(false);
    expect(clock.pendingTimers).toBe(1);

    pacer.close();
    expect(clock.pendingTimers).toBe(0);
    expect(pacer.queuedFrames).toBe(0);
    expect(pacer.hasQueued(1)).toBe(false);
    await settle();
    expect(roomResolved).toBe(true);
    expect(drainedResolved).toBe(true);
    clock.advance(10_000);
    expect(log).toHaveLength(5);
  });
});
