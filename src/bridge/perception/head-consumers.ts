import type { RobotState } from '../../robot/states.js';
import type { PerceptionEvent } from './bus.js';
import { type CommonOptions, Consumer, type ConsumerDeps } from './consumer-base.js';
import { clamp, finiteNumber, type SoundDirection, soundDirection } from './device-state.js';
import { LruMap } from './lru.js';

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
