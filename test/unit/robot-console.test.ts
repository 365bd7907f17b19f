// The long-running robot's schedules and console text: the reconnect backoff, and the LED ring's "look" (an
// animation is one look, so the console prints it once) and its plain and coloured one-line forms.
import { describe, expect, it } from 'vitest';
import { backoffDelayMs } from '../../src/device/reconnect.js';
import { ringLook, ringText } from '../../src/device/ring-text.js';
import { renderRing, SECURITY_FLASH_HALF_MS } from '../../src/robot/led.js';
import type { RobotState } from '../../src/robot/states.js';

const T = 100_000;

function ring(state: RobotState, now: number, overrides: { listening?: boolean; kid?: boolean } = {}) {
  return renderRing({
    state,
    stateSince: T,
    toggles: { kid_mode: overrides.kid ?? false, smart_mode: false },
    facePresent: false,
    listening: overrides.listening ?? false,
    now,
  });
}

describe('reconnect backoff', () => {
  it('waits 1 s, then doubles up to a 30 s cap, however many failures', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((failures) => backoffDelayMs(failures))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000,
    ]);
    expect(backoffDelayMs(10_000)).toBe(30_000);
    expect(backoffDelayMs(3, { firstDelayMs: 50, maxDelayMs: 300 })).toBe(300);
  });
});

describe('the ring on a console', () => {
  it('a flashing or sweeping arc is one look; a real change is another', () => {
    const on = ring('security', T + 10);
    const off = ring('security', T + SECURITY_FLASH_HALF_MS + 10);
    expect(on).not.toEqual(off); // the pixels do flash
    expect(ringLook(on, 'security')).toBe(ringLook(off, 'security'));
    expect(ringLook(ring('dance', T + 100), 'dance')).toBe(ringLook(ring('dance', T + 700), 'dance'));
    expect(ringLook(ring('talk', T), 'talk')).not.toBe(ringLook(ring('idle', T), 'idle'));
    expect(ringLook(ring('talk', T, { listening: true }), 'talk')).not.toBe(
      ringLook(ring('talk', T), 'talk'),
    );
  });

  it('plain text names each part with its rgb; colour adds one dot per pixel', () => {
    const talking = ring('talk', T, { listening: true, kid: true });
    expect(ringText(talking, 'talk', false)).toBe(
      'arc 0,60,0 · face off · kid 220,80,80 · smart off · listening 255,0,0',
    );
    expect(ringText(ring('security', T), 'security', false)).toMatch(/^arc flashing 80,80,80 \(security\)/);
    const coloured = ringText(talking, 'talk', true);
    expect(coloured.match(/●/g)).toHaveLength(8); // six arc pixels, the kid pip, the listening pip
    // Dim dots for the pixels that are off: face, smart and the two reserved ones.
    expect(coloured.split('\x1b[2m·').length - 1).toBe(4);
    expect(coloured).toContain('\x1b[38;2;255;0;0m●');
    expect(coloured.endsWith('listening 255,0,0')).toBe(true);
  });
});
