// What every perception consumer shares: its dependencies (clock, voice actions, device state), the
// synchronous handle/subscribe/stop life cycle, and fire-and-log voice calls.
// clears all of its timers; `subscribe(bus)` returns a function that unsubscribes and stops.
import type { Clock } from '../../audio/pacer.js';
import type { RobotState } from '../../robot/states.js';
import { type Logger, silentLogger, ThrottledLog } from '../../util/log.js';
import type { PerceptionBus, PerceptionEvent, SubscribeOptions } from './bus.js';

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

export interface CommonOptions {
  /** Per-device tables are bounded to this many devices (default 64). */
  maxDevices?: number;
}

export abstract class Consumer {
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
