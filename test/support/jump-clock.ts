// A clock that runs with real time from a chosen start (e.g. 10:00 local, inside the greeting hours) and can
// also jump forward, firing every timer that falls due: scenarios mix real-time behaviour with "90 s later".
import type { Clock } from '../../src/audio/pacer.js';

export class JumpClock implements Clock {
  private offset = 0;
  private readonly realStart = Date.now();
  private readonly timers = new Map<number, { dueAt: number; callback: () => void }>();
  private seq = 0;
  private readonly ticker: NodeJS.Timeout;

  constructor(private readonly start: number) {
    this.ticker = setInterval(() => this.fireDue(), 10);
    this.ticker.unref();
  }

  /** Today at the given local hour. */
  static at(hour: number): JumpClock {
    const d = new Date();
    d.setHours(hour, 0, 0, 0);
    return new JumpClock(d.getTime());
  }

  now(): number {
    return this.start + (Date.now() - this.realStart) + this.offset;
  }

  setTimer(callback: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { dueAt: this.now() + Math.max(0, ms), callback });
    return id;
  }

  clearTimer(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  jump(ms: number): void {
    this.offset += ms;
    this.fireDue();
  }

  stop(): void {
    clearInterval(this.ticker);
    this.timers.clear();
  }

  private fireDue(): void {
    const now = this.now();
    for (const [id, timer] of [...this.timers].sort((a, b) => a[1].dueAt - b[1].dueAt)) {
      if (timer.dueAt > now) continue;
      this.timers.delete(id);
      timer.callback();
    }
  }
}
