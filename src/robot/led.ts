// The 12-pixel LED ring (SPEC "LED ring contract"), pure: renderRing(input) is what the firmware
// repaints every REPAINT_MS; applyLedWrite is the rule for the MCP LED tools.
//
//   0-5   state arc   idle off · talk · story_time · security flashing · sleep · dance rainbow sweep
//   6     face pip    yellow while a face is present; green while identified (see facePip)
//   7, 10 reserved    always off
//   8     kid_mode    KID_PIP when on
//   9     smart_mode  SMART_PIP when on
//   11    listening   LISTENING_RED while the mic is open and the user holds the turn
//
// LISTENING_RED is pure red (255,0,0): a hue distinct from the kid pip's pink and the smart pip's orange,
// because 16-bit colour quantisation crushes brightness differences (SPEC).
import type { RobotState } from './states.js';

export type Rgb = [number, number, number];
type Colour = Readonly<Rgb>;

export const LED_COUNT = 12;
/** Left ring: the state arc, the only pixels the MCP LED tools may write. */
export const LEFT_RING_SIZE = 6;
export const FACE_PIP_INDEX = 6;
export const RESERVED_INDEXES: readonly number[] = [7, 10];
export const KID_PIP_INDEX = 8;
export const SMART_PIP_INDEX = 9;
export const LISTENING_INDEX = 11;

/** kReassertIntervalMs: the arc and the right ring are repainted this often (5 Hz). */
export const REPAINT_MS = 200;
/** kSecurityFlashHalfMs. */
export const SECURITY_FLASH_HALF_MS = 500;
/** kFaceIdentifiedTimeoutMs: green lasts this long after the last set_face_identified. */
export const FACE_IDENTIFIED_TIMEOUT_MS = 4000;
/** kFaceIdentifiedFlickerGraceMs: while green, a face gone for less than this keeps the pip green. */
export const FACE_IDENTIFIED_FLICKER_GRACE_MS = 1500;
/** One full hue rotation of the dance sweep. */
export const DANCE_SWEEP_PERIOD_MS = 1200;
/** HSV value of the dance sweep (0-255). */
export const DANCE_BRIGHTNESS = 120;

export const OFF: Colour = [0, 0, 0];
/** Arc colours; security is its "on" colour (it flashes), dance is the sweep (danceSweep). */
export const STATE_COLORS: Readonly<Record<Exclude<RobotState, 'dance'>, Colour>> = {
  idle: [0, 0, 0],
  talk: [0, 60, 0],
  story_time: [100, 40, 0],
  security: [80, 80, 80],
  sleep: [0, 0, 16],
};
export const FACE_YELLOW: Colour = [168, 140, 0];
export const FACE_GREEN: Colour = [0, 140, 30];
export const KID_PIP: Colour = [220, 80, 80];
export const SMART_PIP: Colour = [168, 80, 0];
export const LISTENING_RED: Colour = [255, 0, 0];

export interface RingInput {
  state: RobotState;
  /** When `state` was entered (ms): the security flash phase starts here. */
  stateSince: number;
  toggles: { kid_mode: boolean; smart_mode: boolean };
  facePresent: boolean;
  /** When the face went away (ms); only read while !facePresent. */
  faceLostAt?: number;
  /** Last set_face_identified (ms). */
  faceIdentifiedAt?: number;
  /** Mic open and the user holds the turn. */
  listening: boolean;
  now: number;
  /** Start of the dance animation (ms); defaults to stateSince. */
  danceStartedAt?: number;
}

/** The 12 pixels the firmware repaints at `now`. Always 12 fresh [r,g,b] arrays. */
export function renderRing(input: RingInput): Rgb[] {
  const ring: Rgb[] = [];
  const arc = stateArc(input);
  for (let i = 0; i < LEFT_RING_SIZE; i++) ring.push(arc[i]!);
  ring.push(copy(facePip(input)));
  ring.push(copy(OFF));
  ring.push(copy(input.toggles.kid_mode ? KID_PIP : OFF));
  ring.push(copy(input.toggles.smart_mode ? SMART_PIP : OFF));
  ring.push(copy(OFF));
  ring.push(copy(input.listening ? LISTENING_RED : OFF));
  return ring;
}

/** Pixels 0-5 for the state. */
export function stateArc(input: Pick<RingInput, 'state' | 'stateSince' | 'now' | 'danceStartedAt'>): Rgb[] {
  if (input.state === 'dance') return danceSweep(input.now - (input.danceStartedAt ?? input.stateSince));
  let colour = STATE_COLORS[input.state];
  if (input.state === 'security' && !securityFlashOn(input.now - input.stateSince)) colour = OFF;
  return Array.from({ length: LEFT_RING_SIZE }, () => copy(colour));
}

/** On for the first half-period after entering security, off for the next, and so on. */
export function securityFlashOn(elapsedMs: number): boolean {
  return Math.floor(Math.max(0, elapsedMs) / SECURITY_FLASH_HALF_MS) % 2 === 0;
}

/** The rainbow across pixels 0-5 (60° apart), rotating one full turn every DANCE_SWEEP_PERIOD_MS. */
export function danceSweep(elapsedMs: number): Rgb[] {
  const phase = ((Math.max(0, elapsedMs) % DANCE_SWEEP_PERIOD_MS) * 360) / DANCE_SWEEP_PERIOD_MS;
  return Array.from({ length: LEFT_RING_SIZE }, (_, i) =>
    hsvToRgb((phase + (i * 360) / LEFT_RING_SIZE) % 360, DANCE_BRIGHTNESS),
  );
}

/**
 * Pixel 6. Green while identified (less than FACE_IDENTIFIED_TIMEOUT_MS since the last
 * set_face_identified) and the face is present or gone for less than FACE_IDENTIFIED_FLICKER_GRACE_MS;
 * otherwise yellow while a face is present, else off.
 */
export function facePip(
  input: Pick<RingInput, 'facePresent' | 'faceLostAt' | 'faceIdentifiedAt' | 'now'>,
): Colour {
  const { now, facePresent, faceLostAt, faceIdentifiedAt } = input;
  const identified =
    faceIdentifiedAt !== undefined &&
    now >= faceIdentifiedAt &&
    now - faceIdentifiedAt < FACE_IDENTIFIED_TIMEOUT_MS;
  const inGrace = faceLostAt !== undefined && now - faceLostAt < FACE_IDENTIFIED_FLICKER_GRACE_MS;
  if (identified && (facePresent || inGrace)) return FACE_GREEN;
  return facePresent ? FACE_YELLOW : OFF;
}

export type LedWriteResult =
  | { ok: true; ring: Rgb[] }
  | { ok: false; ring: Rgb[]; error: { code: 'right_ring' | 'invalid_index'; message: string } };

/**
 * One write by self.robot.set_led_color / set_led_multi. Pixels 0-5 only; 6-11 belong to the firmware
 * and are rejected (the caller logs a warning). Never mutates `leftRing`; on error the ring is returned
 * unchanged. Channels are rounded and clamped to 0-255 (non-numbers become 0).
 */
export function applyLedWrite(
  leftRing: readonly Colour[],
  index: number,
  rgb: readonly number[],
): LedWriteResult {
  const error = checkIndex(index);
  if (error) return { ok: false, ring: leftRing.map(copy), error };
  const ring = leftRing.map(copy);
  ring[index] = [byte(rgb[0]), byte(rgb[1]), byte(rgb[2])];
  return { ok: true, ring };
}

/** Several writes, all or nothing (set_led_multi): the first bad index rejects the whole call. */
export function applyLedWrites(
  leftRing: readonly Colour[],
  writes: ReadonlyArray<{ index: number; rgb: readonly number[] }>,
): LedWriteResult {
  let ring = leftRing.map(copy);
  for (const write of writes) {
    const result = applyLedWrite(ring, write.index, write.rgb);
    if (!result.ok) return { ...result, ring: leftRing.map(copy) };
    ring = result.ring;
  }
  return { ok: true, ring };
}

function checkIndex(index: number): { code: 'right_ring' | 'invalid_index'; message: string } | null {
  if (!Number.isInteger(index) || index < 0 || index >= LED_COUNT) {
    return { code: 'invalid_index', message: `Invalid pixel index ${index}` };
  }
  if (index >= LEFT_RING_SIZE) {
    return { code: 'right_ring', message: `Pixel ${index} belongs to the right ring and cannot be written` };
  }
  return null;
}

function byte(value: unknown): number {
  const n = typeof value === 'number' && Number.isFinite(value) ? Math.round(value) : 0;
  return Math.min(255, Math.max(0, n));
}

function copy(colour: Colour): Rgb {
  return [colour[0], colour[1], colour[2]];
}

/** Hue in degrees, full saturation, value 0-255. */
function hsvToRgb(hue: number, value: number): Rgb {
  const sector = Math.floor(hue / 60) % 6;
  const f = hue / 60 - Math.floor(hue / 60);
  const rising = Math.round(value * f);
  const falling = Math.round(value * (1 - f));
  const v = Math.round(value);
  switch (sector) {
    case 0:
      return [v, rising, 0];
    case 1:
      return [falling, v, 0];
    case 2:
      return [0, v, rising];
    case 3:
      return [0, falling, v];
    case 4:
      return [rising, 0, v];
    default:
      return [v, 0, falling];
  }
}
