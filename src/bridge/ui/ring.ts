// What the LED ring mirror needs to run the robot's own renderRing() in the browser, built from the bridge's
// view of a device. Times travel as ages (ms before the server's now) so the browser's clock, however far off,
// never shifts the face timeout or the security flash phase.
import { FACE_IDENTIFIED_TIMEOUT_MS } from '../../robot/led.js';
import type { RobotState } from '../../robot/states.js';
import type { DeviceSnapshot } from '../perception/device-state.js';

export interface RingWire {
  /** null: no device has reported anything yet. */
  device_id: string | null;
  /** false: the device asked for is not (yet) known to the bridge; the ring shows defaults. */
  known: boolean;
  /** The arc's state; a device that never reported one is drawn idle (the firmware boots idle). */
  state: RobotState;
  reported_state: RobotState | null;
  state_age_ms: number;
  face_present: boolean;
  face_lost_age_ms: number | null;
  /** Age of the last identification still in force; null = not identified. */
  identified_age_ms: number | null;
  listening: boolean;
  dance_age_ms: number | null;
  toggles: { kid_mode: boolean; smart_mode: boolean };
  /** Age of the device's last event; null when unknown. */
  updated_age_ms: number | null;
  /** The server's clock (epoch ms) when this was built: the page's "last update". */
  server_now_ms: number;
}

export interface RingSource {
  device: DeviceSnapshot | undefined;
  /** The id asked for (the page's ?device=), when one was. */
  requestedId?: string;
  toggles: { kid_mode: boolean; smart_mode: boolean };
  nowMs: number;
  /** The face-identified refresher is keeping this device's pip green right now. */
  refreshing: boolean;
}

const age = (nowMs: number, at: number | null | undefined): number | null =>
  at === null || at === undefined ? null : Math.max(0, nowMs - at);

export function ringWire(source: RingSource): RingWire {
  const { device, nowMs } = source;
  const toggles = { kid_mode: source.toggles.kid_mode, smart_mode: source.toggles.smart_mode };
  if (!device) {
    return {
      device_id: source.requestedId ?? null,
      known: false,
      state: 'idle',
      reported_state: null,
      state_age_ms: 0,
      face_present: false,
      face_lost_age_ms: null,
      identified_age_ms: null,
      listening: false,
      dance_age_ms: null,
      toggles,
      updated_age_ms: null,
      server_now_ms: nowMs,
    };
  }
  return {
    device_id: device.device_id,
    known: true,
    state: device.state ?? 'idle',
    reported_state: device.state,
    state_age_ms: age(nowMs, device.state_since) ?? 0,
    face_present: device.face.present,
    face_lost_age_ms: age(nowMs, device.face.lost_at),
    identified_age_ms: identifiedAge(source),
    listening: device.chat_status?.status === 'listening',
    dance_age_ms: device.dance.active ? age(nowMs, device.dance.since) : null,
    toggles,
    updated_age_ms: age(nowMs, device.updated_at),
    server_now_ms: nowMs,
  };
}

/**
 * While the refresher runs, the robot was told "identified" at most one refresh ago: age 0 keeps the pip
 * green until the next poll. Otherwise the last face_recognized counts while the firmware's own timeout has
 * not run out.
 */
function identifiedAge(source: RingSource): number | null {
  if (source.refreshing) return 0;
  const at = source.device?.identified?.at;
  const ms = age(source.nowMs, at);
  return ms !== null && ms < FACE_IDENTIFIED_TIMEOUT_MS ? ms : null;
}
