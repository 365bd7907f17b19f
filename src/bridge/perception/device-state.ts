// Per-device state kept from perception events (SPEC "Perception event record": state_changed updates the
// known robot state), for the consumers (robot state) and the dashboard (snapshot). Bounded: the least
// recently updated device is forgotten past `maxDevices`. Times are epoch milliseconds of the bridge's clock
// when the event was applied; `last_event.ts` keeps the record's own `ts` (epoch seconds).
import { isRobotState, type RobotState } from '../../robot/states.js';
import type { PerceptionEvent } from './bus.js';
import { LruMap } from './lru.js';

export type SoundDirection = 'left' | 'right' | 'center';

export interface DeviceSnapshot {
  device_id: string;
  session_id: string;
  /** Last `state_changed.to`; null until the device reported one. */
  state: RobotState | null;
  state_since: number | null;
  /** `state_changed.from` and `reason` of the last transition. */
  previous_state: string | null;
  state_reason: string | null;
  face: { present: boolean; last_seen: number | null; lost_at: number | null };
  sound: { direction: SoundDirection; balance: number; energy: number; at: number } | null;
  identified: { name: string; confidence: number | null; at: number } | null;
  chat_status: { status: string; at: number } | null;
  head_pet: { active: boolean; since: number | null; last_duration_ms: number | null };
  dance: { active: boolean; song: string | null; since: number | null };
  last_wake_word: { text: string; at: number } | null;
  last_event: { name: string; ts: number; at: number } | null;
  events: number;
  updated_at: number;
}

export interface DeviceStateOptions {
  /** Devices remembered at once (default 32). */
  maxDevices?: number;
  /** Epoch ms (default Date.now). */
  now?: () => number;
}

/** SPEC sound_event `direction`; anything else (including `centre`) is mapped or rejected here. */
export function soundDirection(value: unknown): SoundDirection | null {
  if (typeof value !== 'string') return null;
  const v = value.trim().toLowerCase();
  if (v === 'left' || v === 'right') return v;
  if (v === 'center' || v === 'centre' || v === 'middle' || v === 'front') return 'center';
  return null;
}

export function finiteNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

export function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

function text(value: unknown, max = 200): string | null {
  return typeof value === 'string' ? value.slice(0, max) : null;
}

export class DeviceStateStore {
  private readonly devices: LruMap<string, DeviceSnapshot>;
  private readonly now: () => number;

  constructor(options: DeviceStateOptions = {}) {
    this.devices = new LruMap(Math.max(1, Math.floor(options.maxDevices ?? 32)));
    this.now = options.now ?? Date.now;
  }

  /** Applies one event and returns the device's updated snapshot (a copy). Never throws on odd data. */
  apply(event: PerceptionEvent): DeviceSnapshot {
    const at = this.now();
    const device = this.devices.get(event.device_id) ?? blankSnapshot(event.device_id, at);
    const data = event.data ?? {};
    if (event.session_id) device.session_id = event.session_id;
    device.events++;
    device.updated_at = at;
    device.last_event = { name: event.name, ts: event.ts, at };
    switch (event.name) {
      case 'state_changed': {
        if (isRobotState(data.to)) {
          if (device.state !== data.to) device.state_since = at;
          device.state = data.to;
          device.previous_state = text(data.from, 32);
          device.state_reason = text(data.reason);
        }
        break;
      }
      case 'face_detected':
        device.face.present = true;
        device.face.last_seen = at;
        break;
      case 'face_lost':
        device.face.present = false;
        device.face.lost_at = at;
        break;
      case 'face_recognized': {
        device.face.present = true;
        device.face.last_seen = at;
        const name = text(data.name, 100);
        if (name) device.identified = { name, confidence: finiteNumber(data.confidence), at };
        break;
      }
      case 'sound_event': {
        const direction = soundDirection(data.direction);
        if (direction) {
          device.sound = {
            direction,
            balance: clamp(finiteNumber(data.balance) ?? 0, -1, 1),
            energy: clamp(finiteNumber(data.energy) ?? 0, 0, 1),
            at,
          };
        }
        break;
      }
      case 'chat_status': {
        const status = text(data.status, 64);
        if (status) device.chat_status = { status, at };
        break;
      }
      case 'head_pet_started':
        device.head_pet.active = true;
        device.head_pet.since = at;
        break;
      case 'head_pet_ended':
        device.head_pet.active = false;
        device.head_pet.last_duration_ms = finiteNumber(data.duration_ms);
        break;
      case 'dance_started':
        device.dance = { active: true, song: text(data.song), since: at };
        break;
      case 'dance_ended':
        device.dance = { active: false, song: text(data.song) ?? device.dance.song, since: null };
        break;
      case 'wake_word_detected':
        device.last_wake_word = { text: text(data.text) ?? '', at };
        break;
    }
    this.devices.set(event.device_id, device);
    return structuredClone(device);
  }

  /** The device's last reported robot state, if any. */
  robotState(deviceId: string): RobotState | undefined {
    return this.devices.peek(deviceId)?.state ?? undefined;
  }

  /** One device (a copy), or undefined. */
  get(deviceId: string): DeviceSnapshot | undefined {
    const device = this.devices.peek(deviceId);
    return device ? structuredClone(device) : undefined;
  }

  /** Every known device (copies), most recently updated first: the dashboard's view. */
  snapshot(): DeviceSnapshot[] {
    return [...this.devices.values()].reverse().map((device) => structuredClone(device));
  }

  get size(): number {
    return this.devices.size;
  }

  forget(deviceId: string): boolean {
    return this.devices.delete(deviceId);
  }
}

/** A device the bridge has heard nothing of yet (exported for tests that build snapshots). */
export function blankSnapshot(deviceId: string, at: number): DeviceSnapshot {
  return {
    device_id: deviceId,
    session_id: '',
    state: null,
    state_since: null,
    previous_state: null,
    state_reason: null,
    face: { present: false, last_seen: null, lost_at: null },
    sound: null,
    identified: null,
    chat_status: null,
    head_pet: { active: false, since: null, last_duration_ms: null },
    dance: { active: false, song: null, since: null },
    last_wake_word: null,
    last_event: null,
    events: 0,
    updated_at: at,
  };
}
