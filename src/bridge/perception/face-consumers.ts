import type { RobotState } from '../../robot/states.js';
import type { PerceptionEvent } from './bus.js';
import { type CommonOptions, Consumer, type ConsumerDeps } from './consumer-base.js';
import { LruMap } from './lru.js';

// ---------------------------------------------------------------------------------------------------------
// Face greeter

export interface FaceGreeterOptions extends CommonOptions {
  /** FACE_GREET_TEXT; empty (after trimming) disables the greeter. Default '😊 Hi there!'. */
  text?: string;
  /** FACE_GREET_MIN_INTERVAL_SEC × 1000: minimum gap between greetings of one device (default 30 000). */
  minIntervalMs?: number;
  /** FACE_GREET_HOUR_START / _END: local hours, start inclusive, end exclusive (default 6, 21). start > end
   *  wraps past midnight (22..6); start = end means never; 0..24 means always. */
  hourStart?: number;
  hourEnd?: number;
  /** States in which the greeter never speaks (default security, sleep, story_time, dance). */
  blockedStates?: readonly RobotState[];
  /** Local hour (0–23) of an epoch-ms time (default `new Date(ms).getHours()`, the process time zone). */
  localHour?: (epochMs: number) => number;
}

/** The `face_greet` config section (src/config/schema.ts) as greeter options. */
export function faceGreeterOptionsFromConfig(section: {
  text: string;
  min_interval_sec: number;
  hour_start: number;
  hour_end: number;
}): FaceGreeterOptions {
  return {
    text: section.text,
    minIntervalMs: section.min_interval_sec * 1000,
    hourStart: section.hour_start,
    hourEnd: section.hour_end,
  };
}

export const DEFAULT_GREETING = '😊 Hi there!';

/** Whether `hour` lies in [start, end) on a 24-hour dial (wrapping when start > end). */
export function inGreetingHours(hour: number, start: number, end: number): boolean {
  if (start === end) return false;
  if (start < end) return hour >= start && hour < end;
  return hour >= start || hour < end;
}

/** When the face greeter last spoke to a device (read by the face-lost aborter). */
export interface GreetingLog {
  lastGreetingAt(deviceId: string): number | undefined;
}

export class FaceGreeter extends Consumer implements GreetingLog {
  private readonly text: string;
  private readonly minIntervalMs: number;
  private readonly hourStart: number;
  private readonly hourEnd: number;
  private readonly blocked: readonly RobotState[];
  private readonly localHour: (epochMs: number) => number;
  private readonly greeted: LruMap<string, number>;
  greetings = 0;

  constructor(deps: ConsumerDeps, options: FaceGreeterOptions = {}) {
    super('face-greeter', deps);
    this.text = (options.text ?? DEFAULT_GREETING).trim();
    this.minIntervalMs = options.minIntervalMs ?? 30_000;
    this.hourStart = options.hourStart ?? 6;
    this.hourEnd = options.hourEnd ?? 21;
    this.blocked = options.blockedStates ?? ['security', 'sleep', 'story_time', 'dance'];
    this.localHour = options.localHour ?? ((ms) => new Date(ms).getHours());
    this.greeted = new LruMap(options.maxDevices ?? 64);
  }

  get enabled(): boolean {
    return this.text.length > 0;
  }

  lastGreetingAt(deviceId: string): number | undefined {
    return this.greeted.peek(deviceId);
  }

  protected onEvent(event: PerceptionEvent): void {
    if (event.name !== 'face_detected' || !this.enabled) return;
    const id = event.device_id;
    if (this.isIn(id, this.blocked)) return;
    const now = this.clock.now();
    if (!inGreetingHours(this.localHour(now), this.hourStart, this.hourEnd)) return;
    const last = this.greeted.peek(id);
    if (last !== undefined && now - last < this.minIntervalMs) return;
    this.greeted.set(id, now);
    this.greetings++;
    this.fire('inject', id, () => this.voice.inject(id, this.text));
  }

  protected override onStop(): void {
    this.greeted.clear();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Face-lost aborter

export interface FaceLostAborterOptions extends CommonOptions {
  /** Wait this long after face_lost before aborting; a face coming back cancels (default 4000). */
  graceMs?: number;
  /** Abort only if the greeter greeted this device at most this long before the grace expires (default 12 000). */
  greetingWindowMs?: number;
}

/** Face events that mean "the face is (back) in view" and cancel a pending face-lost grace. */
const FACE_BACK = new Set(['face_detected', 'face_recognized']);

export class FaceLostAborter extends Consumer {
  private readonly graceMs: number;
  private readonly windowMs: number;
  private readonly pending: LruMap<string, unknown>;
  /** The greeting each device's last abort was for: one greeting is aborted at most once. */
  private readonly abortedFor: LruMap<string, number>;
  aborts = 0;

  constructor(
    deps: ConsumerDeps,
    private readonly greetings: GreetingLog,
    options: FaceLostAborterOptions = {},
  ) {
    super('face-lost-aborter', deps);
    this.graceMs = options.graceMs ?? 4000;
    this.windowMs = options.greetingWindowMs ?? 12_000;
    const max = options.maxDevices ?? 64;
    this.pending = new LruMap(max, (_id, timer) => this.clock.clearTimer(timer));
    this.abortedFor = new LruMap(max);
  }

  /** Devices with a face-lost grace running. */
  get pendingCount(): number {
    return this.pending.size;
  }

  protected onEvent(event: PerceptionEvent): void {
    const id = event.device_id;
    if (FACE_BACK.has(event.name)) {
      this.cancel(id);
      return;
    }
    if (event.name !== 'face_lost' || this.pending.has(id)) return; // the grace runs from the first loss
    const timer = this.clock.setTimer(() => {
      this.pending.delete(id);
      this.expire(id);
    }, this.graceMs);
    this.pending.set(id, timer);
  }

  private expire(id: string): void {
    const greetedAt = this.greetings.lastGreetingAt(id);
    if (greetedAt === undefined || this.clock.now() - greetedAt > this.windowMs) return;
    if (this.abortedFor.peek(id) === greetedAt) return;
    this.abortedFor.set(id, greetedAt);
    this.aborts++;
    this.fire('abort', id, () => this.voice.abort(id));
  }

  private cancel(id: string): void {
    const timer = this.pending.peek(id);
    if (timer === undefined) return;
    this.clock.clearTimer(timer);
    this.pending.delete(id);
  }

  protected override onStop(): void {
    for (const timer of this.pending.values()) this.clock.clearTimer(timer);
    this.pending.clear();
    this.abortedFor.clear();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Face-identified refresher

export interface FaceIdentifiedRefresherOptions extends CommonOptions {
  /** Cadence of set-face-identified while fresh (default 3000; must stay under the firmware's 4000). */
  intervalMs?: number;
  /** The identity is fresh while the last face_recognized is at most this old (default 10 000). */
  freshMs?: number;
  /** After face_lost keep refreshing this long; face_detected / face_recognized cancel (default 4000). */
  lostGraceMs?: number;
}

interface Refresh {
  recognizedAt: number;
  timer: unknown;
  lostTimer: unknown;
}

export class FaceIdentifiedRefresher extends Consumer {
  private readonly intervalMs: number;
  private readonly freshMs: number;
  private readonly lostGraceMs: number;
  private readonly active: LruMap<string, Refresh>;
  refreshes = 0;

  constructor(deps: ConsumerDeps, options: FaceIdentifiedRefresherOptions = {}) {
    super('face-identified-refresher', deps);
    this.intervalMs = options.intervalMs ?? 3000;
    this.freshMs = options.freshMs ?? 10_000;
    this.lostGraceMs = options.lostGraceMs ?? 4000;
    this.active = new LruMap(options.maxDevices ?? 64, (_id, refresh) => this.clearTimers(refresh));
  }

  /** Whether the device is being refreshed. */
  isRefreshing(deviceId: string): boolean {
    return this.active.has(deviceId);
  }

  protected onEvent(event: PerceptionEvent): void {
    const id = event.device_id;
    const refresh = this.active.peek(id);
    switch (event.name) {
      case 'face_recognized': {
        if (refresh) {
          refresh.recognizedAt = this.clock.now();
          this.cancelLost(refresh);
          return;
        }
        const started: Refresh = { recognizedAt: this.clock.now(), timer: null, lostTimer: null };
        this.active.set(id, started);
        this.refresh(id, started);
        return;
      }
      case 'face_detected':
        if (refresh) this.cancelLost(refresh);
        return;
      case 'face_lost':
        if (refresh && refresh.lostTimer === null) {
          refresh.lostTimer = this.clock.setTimer(() => {
            refresh.lostTimer = null;
            this.end(id);
          }, this.lostGraceMs);
        }
        return;
    }
  }

  private refresh(id: string, refresh: Refresh): void {
    this.refreshes++;
    this.fire('set-face-identified', id, () => this.voice.setFaceIdentified(id));
    refresh.timer = this.clock.setTimer(() => this.tick(id, refresh), this.intervalMs);
  }

  private tick(id: string, refresh: Refresh): void {
    refresh.timer = null;
    if (this.active.peek(id) !== refresh) return;
    if (this.clock.now() - refresh.recognizedAt > this.freshMs) {
      this.end(id);
      return;
    }
    this.refresh(id, refresh);
  }

  private end(id: string): void {
    const refresh = this.active.peek(id);
    if (!refresh) return;
    this.clearTimers(refresh);
    this.active.delete(id);
  }

  private cancelLost(refresh: Refresh): void {
    if (refresh.lostTimer === null) return;
    this.clock.clearTimer(refresh.lostTimer);
    refresh.lostTimer = null;
  }

  private clearTimers(refresh: Refresh): void {
    if (refresh.timer !== null) this.clock.clearTimer(refresh.timer);
    this.cancelLost(refresh);
    refresh.timer = null;
  }

  protected override onStop(): void {
    for (const refresh of this.active.values()) this.clearTimers(refresh);
    this.active.clear();
  }
}
