// The LED ring for a terminal: coloured dots when the output is a colour terminal, plain rgb text otherwise, and a
// "look" key that stays the same while the ring only animates (security flashes every 500 ms, dance sweeps every
// 200 ms), so a console prints a ring change once instead of five times a second.
import {
  FACE_PIP_INDEX,
  KID_PIP_INDEX,
  LEFT_RING_SIZE,
  LISTENING_INDEX,
  type Rgb,
  SMART_PIP_INDEX,
  STATE_COLORS,
} from '../robot/led.js';
import type { RobotState } from '../robot/states.js';

const NAMED_PIXELS: ReadonlyArray<[string, number]> = [
  ['face', FACE_PIP_INDEX],
  ['kid', KID_PIP_INDEX],
  ['smart', SMART_PIP_INDEX],
  ['listening', LISTENING_INDEX],
];

function rgbText(rgb: Readonly<Rgb>): string {
  return rgb.every((channel) => channel === 0) ? 'off' : rgb.join(',');
}

/** Pixels 0-5 in words; an animation is named rather than caught mid-frame. */
function arcText(ring: readonly Rgb[], state: RobotState): string {
  if (state === 'security') return `flashing ${rgbText(STATE_COLORS.security)} (security)`;
  if (state === 'dance') return 'rainbow sweep (dance)';
  const arc = ring.slice(0, LEFT_RING_SIZE).map(rgbText);
  return arc.every((pixel) => pixel === arc[0]) ? arc[0]! : arc.join(' ');
}

/** Equal for two rings that look the same to a person watching (animations count as one look). */
export function ringLook(ring: readonly Rgb[], state: RobotState): string {
  return [arcText(ring, state), ...ring.slice(LEFT_RING_SIZE).map(rgbText)].join('|');
}

/** One line: `arc 0,60,0 · face off · kid off · smart off · listening 255,0,0`, after coloured dots if `color`. */
export function ringText(ring: readonly Rgb[], state: RobotState, color: boolean): string {
  const words = [
    `arc ${arcText(ring, state)}`,
    ...NAMED_PIXELS.map(([name, i]) => `${name} ${rgbText(ring[i]!)}`),
  ];
  if (!color) return words.join(' · ');
  const dots = ring.map((rgb) =>
    rgb.every((channel) => channel === 0) ? '\x1b[2m·\x1b[0m' : `\x1b[38;2;${rgb.join(';')}m●\x1b[0m`,
  );
  // The two halves of the ring as on the robot: the state arc (0-5), then the firmware's pips (6-11).
  return `${dots.slice(0, LEFT_RING_SIZE).join('')} ${dots.slice(LEFT_RING_SIZE).join('')}  ${words.join(' · ')}`;
}
