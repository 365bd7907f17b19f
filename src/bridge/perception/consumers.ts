// The six perception consumers of SPEC "Events" 2, each a small state machine over (event, clock):
//
//   face greeter          face_detected → inject FACE_GREET_TEXT (cooldown per device, greeting hours, states)
//   sound turner          sound_event → set-head-angles toward `direction` (energy threshold, rate limit)
//   face-lost aborter     face_lost → after a 4 s grace (cancelled by the face coming back) abort the
//                         in-flight turn, only within 12 s of a greeting (DESIGN §3)
//   wake-word turner      wake_word_detected → turn toward the device's last sound if recent, else centre
//   face-identified       face_recognized → set-face-identified about every 3 s while the identity is fresh,
//   refresher             so the firmware's 4 s timeout does not expire
//   purr player           head_pet_started → play the purr asset (per-device cooldown; an asset, not text to
//                         the model, so the kid-mode sandwich is bypassed by construction)
//
// `handle(event)` is synchronous: it decides at once and fires the voice call without awaiting it (a failed
// call is logged, never thrown), so a slow voice server never backs up the bus. Every consumer's `stop()`
// clears all of its timers; `subscribe(bus)` returns a function that unsubscribes and stops.
import type { Clock } from '../../audio/pacer.js';
import type { RobotState } from '../../robot/states.js';
import { type Logger, silentLogger, ThrottledLog } from '../../util/log.js';
import type { PerceptionBus, PerceptionEvent, SubscribeOptions } from './bus.js';
import { clamp, finiteNumber, type SoundDirection, soundDirection } from './device-state.js';
import { LruMap } from './lru.js';

export type { Clock };

/**
 * The consumers' clock: `now()` must be epoch milliseconds (the greeter takes the local hour from it), so
 * not the pacer's monotonic clock. Timers are unref'd: a pending consumer timer never keeps the process up.
 */
export const wallClock: Clock = {
  now: () => Date.now(),
  setTimer: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    timer.unref?.();
    return timer;
  },
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** What the consumers may ask of the voice server (POST /device/admin/*; see voiceActionsFromClient). */
export interface VoiceActions {
  inject(deviceId: string, text: string): unknown | Promise<unknown>;
  abort(deviceId: string): unknown | Promise<unknown>;
  /** Degrees; the voice route takes integers, yaw −90..90 (negative = left), pitch −45..45. */
  setHeadAngles(deviceId: string, yaw: number, pitch: number): unknown | Promise<unknown>;
  setFaceIdentified(deviceId: string): unknown | Promise<unknown>;
  playPurr(deviceId: string): unknown | Promise<unknown>;
}

/** What the consumers read of the bridge's state. */
export interface DeviceStateReader {
  /** Last reported robot state of the device; undefined when unknown (treated as allowed). */
  robotState(deviceId: string): RobotState | undefined;
  /** The kid_mode toggle. No consumer needs it today: the purr player bypasses the sandwich by design. */
  kidMode?(): boolean;
}

export interface ConsumerDeps {
  clock: Clock;
  voice: VoiceActions;
  devices: DeviceStateReader;
  logger?: Logger;
}

interface CommonOptions {
  /** Per-device tables are bounded to this many devices (default 64). */
  maxDevices?: number;
}

abstract class Consumer {
  protected readonly clock: Clock;
  protected readonly voice: VoiceActions;
  protected readonly devices: DeviceStateReader;
  private readonly log: ThrottledLog;
  private readonly logger: Logger;
  private stopped = false;

  constructor(
    readonly name: string,
    deps: ConsumerDeps,
  ) {
    this.clock = deps.clock;
    this.voice = deps.voice;
    this.devices = deps.devices;
    this.logger = deps.logger ?? silentLogger;
    this.log = new ThrottledLog(this.logger, 10, 10_000, () => this.clock.now());
  }

  /** Reacts to one event (synchronously; voice calls are fired, not awaited). */
  handle(event: PerceptionEvent): void {
    if (this.stopped) return;
    this.onEvent(event);
  }

  /** Subscribes to the bus; the returned function unsubscribes and stops (clears every timer). */
  subscribe(bus: PerceptionBus, options: SubscribeOptions = {}): () => void {
    const unsubscribe = bus.subscribe((event) => this.handle(event), { name: this.name, ...options });
    return () => {
      unsubscribe();
      this.stop();
    };
  }

  /** Clears every timer and ignores further events. */
  stop(): void {
    this.stopped = true;
    this.onStop();
  }

  protected abstract onEvent(event: PerceptionEvent): void;
  protected onStop(): void {}

  protected isIn(deviceId: string, states: readonly RobotState[]): boolean {
    const state = this.devices.robotState(deviceId);
    return state !== undefined && states.includes(state);
  }

  /** Fires a voice call; failures (thrown or rejected) are logged with the consumer's name. */
  protected fire(action: string, deviceId: string, call: () => unknown): void {
    const failed = (error: unknown) =>
      this.log.warn(
        { consumer: this.name, action, device: deviceId, err: (error as Error)?.message ?? String(error) },
        'perception consumer voice call failed',
      );
    try {
      const result = call();
      if (result && typeof (result as Promise<unknown>).then === 'function') {
        (result as Promise<unknown>).then(undefined, failed);
      }
      this.logger.debug({ consumer: this.name, action, device: deviceId }, 'perception consumer acted');
    } catch (error) {
      failed(error);
    }
  }
}

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
// Sound turner

export interface SoundTurnerOptions extends CommonOptions {
  /** Sounds with `energy` below this (0..1) are ignored (default 0.2). */
  minEnergy?: number;
  /** At most one turn per device per this many ms (default 1500). */
  minIntervalMs?: number;
  /** Yaw for left (negative) and right (positive); centre is 0 (default 45). */
  yawDeg?: number;
  /** Pitch sent with every turn (default 0, level). */
  pitchDeg?: number;
  /** Off by default: yaw is ±yawDeg by `direction` alone. On: yaw = round(±yawDeg × |balance|). */
  scaleByBalance?: boolean;
  /** States in which the head is not turned (default sleep, and dance: the choreography owns the head). */
  blockedStates?: readonly RobotState[];
}

export function yawFor(direction: SoundDirection, yawDeg: number): number {
  return direction === 'left' ? -yawDeg : direction === 'right' ? yawDeg : 0;
}

export class SoundTurner extends Consumer {
  private readonly minEnergy: number;
  private readonly minIntervalMs: number;
  private readonly yawDeg: number;
  private readonly pitchDeg: number;
  private readonly scaleByBalance: boolean;
  private readonly blocked: readonly RobotState[];
  private readonly lastTurn: LruMap<string, number>;
  turns = 0;

  constructor(deps: ConsumerDeps, options: SoundTurnerOptions = {}) {
    super('sound-turner', deps);
    this.minEnergy = options.minEnergy ?? 0.2;
    this.minIntervalMs = options.minIntervalMs ?? 1500;
    this.yawDeg = options.yawDeg ?? 45;
    this.pitchDeg = options.pitchDeg ?? 0;
    this.scaleByBalance = options.scaleByBalance ?? false;
    this.blocked = options.blockedStates ?? ['sleep', 'dance'];
    this.lastTurn = new LruMap(options.maxDevices ?? 64);
  }

  protected onEvent(event: PerceptionEvent): void {
    if (event.name !== 'sound_event') return;
    const id = event.device_id;
    const direction = soundDirection(event.data.direction);
    const energy = finiteNumber(event.data.energy);
    if (!direction || energy === null || energy < this.minEnergy) return;
    if (this.isIn(id, this.blocked)) return;
    const now = this.clock.now();
    const last = this.lastTurn.peek(id);
    if (last !== undefined && now - last < this.minIntervalMs) return;
    let yaw = yawFor(direction, this.yawDeg);
    if (this.scaleByBalance) {
      yaw = Math.round(yaw * clamp(Math.abs(finiteNumber(event.data.balance) ?? 1), 0, 1));
    }
    this.lastTurn.set(id, now);
    this.turns++;
    this.fire('set-head-angles', id, () => this.voice.setHeadAngles(id, yaw, this.pitchDeg));
  }

  protected override onStop(): void {
    this.lastTurn.clear();
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
// Wake-word turner

export interface WakeWordTurnerOptions extends CommonOptions {
  /** A sound counts as the speaker's direction if it came less than this long before the wake word (3000). */
  recentMs?: number;
  yawDeg?: number;
  pitchDeg?: number;
  /** Default: dance only (a wake word in sleep wakes the robot, so turning toward the speaker is right). */
  blockedStates?: readonly RobotState[];
}

export class WakeWordTurner extends Consumer {
  private readonly recentMs: number;
  private readonly yawDeg: number;
  private readonly pitchDeg: number;
  private readonly blocked: readonly RobotState[];
  private readonly lastSound: LruMap<string, { direction: SoundDirection; at: number }>;
  turns = 0;

  constructor(deps: ConsumerDeps, options: WakeWordTurnerOptions = {}) {
    super('wake-word-turner', deps);
    this.recentMs = options.recentMs ?? 3000;
    this.yawDeg = options.yawDeg ?? 45;
    this.pitchDeg = options.pitchDeg ?? 0;
    this.blocked = options.blockedStates ?? ['dance'];
    this.lastSound = new LruMap(options.maxDevices ?? 64);
  }

  protected onEvent(event: PerceptionEvent): void {
    const id = event.device_id;
    if (event.name === 'sound_event') {
      const direction = soundDirection(event.data.direction);
      if (direction) this.lastSound.set(id, { direction, at: this.clock.now() });
      return;
    }
    if (event.name !== 'wake_word_detected' || this.isIn(id, this.blocked)) return;
    const sound = this.lastSound.peek(id);
    const recent = sound !== undefined && this.clock.now() - sound.at < this.recentMs;
    const yaw = recent ? yawFor(sound.direction, this.yawDeg) : 0;
    this.turns++;
    this.fire('set-head-angles', id, () => this.voice.setHeadAngles(id, yaw, this.pitchDeg));
  }

  protected override onStop(): void {
    this.lastSound.clear();
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

// ---------------------------------------------------------------------------------------------------------
// Purr player

export interface PurrPlayerOptions extends CommonOptions {
  /** Minimum gap between purrs of one device (default 20 000). */
  cooldownMs?: number;
}

export class PurrPlayer extends Consumer {
  private readonly cooldownMs: number;
  private readonly lastPurr: LruMap<string, number>;
  purrs = 0;

  constructor(deps: ConsumerDeps, options: PurrPlayerOptions = {}) {
    super('purr-player', deps);
    this.cooldownMs = options.cooldownMs ?? 20_000;
    this.lastPurr = new LruMap(options.maxDevices ?? 64);
  }

  protected onEvent(event: PerceptionEvent): void {
    if (event.name !== 'head_pet_started') return;
    const id = event.device_id;
    const now = this.clock.now();
    const last = this.lastPurr.peek(id);
    if (last !== undefined && now - last < this.cooldownMs) return;
    this.lastPurr.set(id, now);
    this.purrs++;
    // An asset played as is: no text reaches the model, so there is no kid-mode sandwich to apply.
    this.fire('play-purr', id, () => this.voice.playPurr(id));
  }

  protected override onStop(): void {
    this.lastPurr.clear();
  }
}

// ---------------------------------------------------------------------------------------------------------
// All six

export interface ConsumersOptions {
  greeter?: FaceGreeterOptions;
  soundTurner?: SoundTurnerOptions;
  aborter?: FaceLostAborterOptions;
  wakeWordTurner?: WakeWordTurnerOptions;
  refresher?: FaceIdentifiedRefresherOptions;
  purr?: PurrPlayerOptions;
  /** Queue bound of each consumer's bus subscription (default: the bus default). */
  maxQueue?: number;
}

export interface Consumers {
  greeter: FaceGreeter;
  soundTurner: SoundTurner;
  aborter: FaceLostAborter;
  wakeWordTurner: WakeWordTurner;
  refresher: FaceIdentifiedRefresher;
  purr: PurrPlayer;
  /** Unsubscribes all six and clears their timers. Idempotent. */
  stop(): void;
}

/** Builds the six consumers and subscribes each to the bus with its own queue. */
export function startConsumers(
  bus: PerceptionBus,
  deps: ConsumerDeps,
  options: ConsumersOptions = {},
): Consumers {
  const greeter = new FaceGreeter(deps, options.greeter);
  const consumers = {
    greeter,
    soundTurner: new SoundTurner(deps, options.soundTurner),
    aborter: new FaceLostAborter(deps, greeter, options.aborter),
    wakeWordTurner: new WakeWordTurner(deps, options.wakeWordTurner),
    refresher: new FaceIdentifiedRefresher(deps, options.refresher),
    purr: new PurrPlayer(deps, options.purr),
  };
  const subscription = options.maxQueue !== undefined ? { maxQueue: options.maxQueue } : {};
  const stops = Object.values(consumers).map((consumer) => consumer.subscribe(bus, subscription));
  return {
    ...consumers,
    stop() {
      for (const stop of stops.splice(0)) stop();
    },
  };
}
