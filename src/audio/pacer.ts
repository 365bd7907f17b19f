// Downlink pacing (DESIGN §4): the device queue holds 40 packets and silently drops the rest, so we send
// at most `prebufferFrames` ahead of playout, then one frame per frame duration on a monotonic clock.
// Control items (sentence_start) ride in the same queue so the device shows each sentence as it plays it.
// Every item carries its reply id; dropping a reply removes its items at once.
// The playout estimate assumes the device plays each frame as it arrives. A frame that leaves late (our event
// loop was behind) is invisible to it while the device still had audio, yet a client that stalls when its own
// smaller buffer runs dry plays the rest of the reply later by up to that much: takeLateness() says how much.

export interface Clock {
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export const monotonicClock: Clock = {
  now: () => performance.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

type Item = { replyId: number } & (
  | { kind: 'audio'; packet: Uint8Array; queuedAt: number }
  | { kind: 'control'; send: () => void }
);

export interface PacerOptions {
  sendAudio: (packet: Uint8Array, replyId: number) => void;
  frameMs?: number;
  prebufferFrames?: number;
  /** Queue bound; producers wait for room (waitForRoom) instead of growing it. */
  maxQueuedFrames?: number;
  clock?: Clock;
}

export class Pacer {
  private readonly queue: Item[] = [];
  private playoutEnd = 0;
  private timer: unknown = null;
  private readonly frameMs: number;
  private readonly aheadLimitMs: number;
  private readonly maxQueued: number;
  /** The clock the playout estimate is on; a wait for the playout runs on it too. */
  readonly clock: Clock;
  private waiters: Array<() => void> = [];
  private queuedAudio = 0;
  private closed = false;
  /** Per reply, the most any of its frames left after it was due (ms). */
  private readonly lateMs = new Map<number, number>();
  framesSent = 0;

  constructor(private readonly options: PacerOptions) {
    this.frameMs = options.frameMs ?? 60;
    this.aheadLimitMs = (options.prebufferFrames ?? 5) * this.frameMs;
    this.maxQueued = options.maxQueuedFrames ?? 200;
    this.clock = options.clock ?? monotonicClock;
  }

  /** Queues a frame; when the device has room it leaves at once (no timer hop on the first-audio path). */
  enqueueAudio(replyId: number, packet: Uint8Array): void {
    if (this.closed) return; // the device is gone: a reply still winding down must not arm the timer again
    this.queue.push({ replyId, kind: 'audio', packet, queuedAt: this.clock.now() });
    this.queuedAudio++;
    if (this.timer === null) this.pump();
  }

  enqueueControl(replyId: number, send: () => void): void {
    if (this.closed) return;
    this.queue.push({ replyId, kind: 'control', send });
    if (this.timer === null) this.pump();
  }

  /** Removes everything queued for a reply, and forgets its playout (the device flushes on tts stop). */
  drop(replyId: number): void {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      if (this.queue[i]!.replyId !== replyId) continue;
      if (this.queue[i]!.kind === 'audio') this.queuedAudio--;
      this.queue.splice(i, 1);
    }
    this.lateMs.delete(replyId);
    this.playoutEnd = this.clock.now();
    // The pending wake-up was for the dropped reply's schedule; the next reply starts its pre-buffer at once.
    if (this.timer !== null) {
      this.clock.clearTimer(this.timer);
      this.timer = null;
    }
    if (this.queue.length > 0) this.schedule(0);
    this.wakeWaiters();
  }

  /** Time (clock ms) at which the device will have played everything sent so far. */
  get playoutEndsAt(): number {
    return Math.max(this.playoutEnd, this.clock.now());
  }

  /**
   * How much later than playoutEndsAt a device that stalls on late frames may finish this reply: the most any
   * of its frames left after it was due, up to the pre-buffer depth (a frame later than that found the
   * estimated device dry, and the estimate moved with it). Forgets the reply.
   */
  takeLateness(replyId: number): number {
    const late = this.lateMs.get(replyId) ?? 0;
    this.lateMs.delete(replyId);
    return Math.min(late, this.aheadLimitMs - this.frameMs);
  }

  get queuedFrames(): number {
    return this.queuedAudio;
  }

  /** Audio and control items waiting, of every reply. */
  get queuedItems(): number {
    return this.queue.length;
  }

  hasQueued(replyId: number): boolean {
    return this.queue.some((item) => item.replyId === replyId);
  }

  /** Resolves when there is room in the queue (or at once). */
  async waitForRoom(signal?: AbortSignal): Promise<void> {
    while (this.queuedAudio >= this.maxQueued && !signal?.aborted) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Resolves when nothing of this reply is queued any more. */
  async drained(replyId: number, signal?: AbortSignal): Promise<void> {
    while (this.hasQueued(replyId) && !signal?.aborted) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) this.clock.clearTimer(this.timer);
    this.timer = null;
    this.queue.length = 0;
    this.queuedAudio = 0;
    this.lateMs.clear();
    this.wakeWaiters();
  }

  private schedule(delayMs: number): void {
    if (this.timer !== null) return;
    this.timer = this.clock.setTimer(() => {
      this.timer = null;
      this.pump();
    }, delayMs);
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (head.kind === 'control') {
        this.queue.shift();
        head.send();
        continue;
      }
      const now = this.clock.now();
      const ahead = Math.max(this.playoutEnd, now) - now;
      if (ahead > this.aheadLimitMs - this.frameMs) {
        this.schedule(ahead - (this.aheadLimitMs - this.frameMs));
        break;
      }
      this.queue.shift();
      this.queuedAudio--;
      // Due when it was queued and the device had room: the timer that sends it should have fired by then.
      const dueAt = Math.max(head.queuedAt, this.playoutEnd - (this.aheadLimitMs - this.frameMs));
      if (now > dueAt)
        this.lateMs.set(head.replyId, Math.max(this.lateMs.get(head.replyId) ?? 0, now - dueAt));
      this.playoutEnd = Math.max(this.playoutEnd, now) + this.frameMs;
      this.framesSent++;
      this.options.sendAudio(head.packet, head.replyId);
    }
    this.wakeWaiters();
  }

  private wakeWaiters(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
