// A manual clock for unit tests: time moves only when the test advances it, and timers fire on the way.
import type { Clock } from '../../src/audio/pacer.js';

/**
 * A manual clock: timers fire only when the test advances time, in due order (ties in creation order).
 * A negative delay counts as 0. Timers that callbacks set while time advances fire in the same advance
 * when they fall due before its end.
 */
export class ManualClock implements Clock {
  private seq = 0;
  private readonly timers = new Map<number, { at: number; callback: () => void }>();

  constructor(public time = 0) {}

  now(): number {
    return this.time;
  }

  setTimer(callback: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.time + Math.max(0, ms), callback });
    return id;
  }

  clearTimer(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Timers set and neither fired nor cleared. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way (including ones they set). */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      // The earliest due timer; Map order is creation order and `<` is strict, so ties fire first-set first.
      let nextId: number | undefined;
      let nextAt = Number.POSITIVE_INFINITY;
      for (const [id, timer] of this.timers) {
        if (timer.at <= end && timer.at < nextAt) {
          nextId = id;
          nextAt = timer.at;
        }
      }
      if (nextId === undefined) break;
      const timer = this.timers.get(nextId)!;
      this.timers.delete(nextId);
      this.time = Math.max(this.time, timer.at);
      timer.callback();
    }
    this.time = end;
  }

  /** Advances to the absolute time `at` (e.g. a recorded start plus an offset); never goes back. */
  advanceTo(at: number): void {
    if (at < this.time) throw new Error(`clock is at ${this.time}, cannot go back to ${at}`);
    this.advance(at - this.time);
  }
}
