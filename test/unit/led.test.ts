// The LED ring contract (SPEC "LED ring contract", Limits): renderRing is a pure function of the robot's
// view at `now`; applyLedWrite is the MCP LED tools' rule. Colours are written out from SPEC here.
import { describe, expect, it } from 'vitest';
import {
  applyLedWrite,
  applyLedWrites,
  DANCE_SWEEP_PERIOD_MS,
  FACE_GREEN,
  FACE_IDENTIFIED_FLICKER_GRACE_MS,
  FACE_IDENTIFIED_TIMEOUT_MS,
  FACE_YELLOW,
  KID_PIP,
  LISTENING_RED,
  REPAINT_MS,
  type Rgb,
  type RingInput,
  renderRing,
  SECURITY_FLASH_HALF_MS,
  SMART_PIP,
  STATE_COLORS,
} from '../../src/robot/led.js';
import { ROBOT_STATES, type RobotState } from '../../src/robot/states.js';

const OFF: Rgb = [0, 0, 0];
const YELLOW: Rgb = [168, 140, 0];
const GREEN: Rgb = [0, 140, 30];
const T = 100_000;

function input(overrides: Partial<RingInput> = {}): RingInput {
  return {
    state: 'idle',
    stateSince: T,
    toggles: { kid_mode: false, smart_mode: false },
    facePresent: false,
    listening: false,
    now: T,
    ...overrides,
  };
}

const arc = (ring: Rgb[]) => ring.slice(0, 6);
const six = (rgb: Rgb) => Array.from({ length: 6 }, () => rgb);

describe('constants (SPEC values)', () => {
  it('timing and colours', () => {
    expect(REPAINT_MS).toBe(200);
    expect(SECURITY_FLASH_HALF_MS).toBe(500);
    expect(FACE_IDENTIFIED_TIMEOUT_MS).toBe(4000);
    expect(FACE_IDENTIFIED_FLICKER_GRACE_MS).toBe(1500);
    expect(STATE_COLORS).toEqual({
      idle: [0, 0, 0],
      talk: [0, 60, 0],
      story_time: [100, 40, 0],
      security: [80, 80, 80],
      sleep: [0, 0, 16],
    });
    expect(FACE_YELLOW).toEqual(YELLOW);
    expect(FACE_GREEN).toEqual(GREEN);
    expect(KID_PIP).toEqual([220, 80, 80]);
    expect(SMART_PIP).toEqual([168, 80, 0]);
    expect(LISTENING_RED).toEqual([255, 0, 0]);
  });
});

describe('state arc (pixels 0-5)', () => {
  it.each([
    ['idle', [0, 0, 0]],
    ['talk', [0, 60, 0]],
    ['story_time', [100, 40, 0]],
    ['security', [80, 80, 80]],
    ['sleep', [0, 0, 16]],
  ] as Array<[RobotState, Rgb]>)('%s → %j on all six pixels', (state, rgb) => {
    const ring = renderRing(input({ state }));
    expect(ring).toHaveLength(12);
    expect(arc(ring)).toEqual(six(rgb));
  });

  it.each([
    [0, true],
    [499, true],
    [500, false],
    [999, false],
    [1000, true],
    [1499, true],
    [1500, false],
  ])('security %i ms after entry: flash on = %s', (elapsed, on) => {
    const ring = renderRing(input({ state: 'security', stateSince: T, now: T + elapsed }));
    expect(arc(ring)).toEqual(six(on ? [80, 80, 80] : OFF));
  });

  it('the flash phase follows the entry time, not the clock', () => {
    // 500 ms after entry is off even though `now` is a whole multiple of 1000.
    expect(arc(renderRing(input({ state: 'security', stateSince: 1_500, now: 2_000 })))).toEqual(six(OFF));
    expect(arc(renderRing(input({ state: 'security', stateSince: 1_500, now: 2_500 })))).toEqual(
      six([80, 80, 80]),
    );
  });

  it('non-flashing states do not change with time', () => {
    for (const state of ['idle', 'talk', 'story_time', 'sleep'] as const) {
      for (const elapsed of [0, 500, 1000, 12_345]) {
        expect(arc(renderRing(input({ state, now: T + elapsed })))).toEqual(six([...STATE_COLORS[state]]));
      }
    }
  });
});

describe('dance: rainbow sweep on the left ring only', () => {
  const dance = (elapsed: number, extra: Partial<RingInput> = {}) =>
    renderRing(input({ state: 'dance', stateSince: T, danceStartedAt: T, now: T + elapsed, ...extra }));

  it('six different lit colours at once', () => {
    const pixels = arc(dance(0));
    expect(new Set(pixels.map((p) => p.join(','))).size).toBe(6);
    for (const p of pixels) expect(Math.max(...p)).toBeGreaterThan(0);
  });

  it('changes with time and is a pure function of time since the dance started', () => {
    expect(arc(dance(0))).not.toEqual(arc(dance(REPAINT_MS)));
    expect(arc(dance(300))).toEqual(arc(dance(300)));
    expect(arc(dance(0))).toEqual(arc(dance(DANCE_SWEEP_PERIOD_MS)));
    // Same elapsed time from a different start → same picture.
    expect(arc(dance(700))).toEqual(
      arc(renderRing(input({ state: 'dance', stateSince: 5, danceStartedAt: 5, now: 705 }))),
    );
  });

  it('the hue rotates across the pixels: pixel i+1 now is where pixel i will be', () => {
    const sixth = DANCE_SWEEP_PERIOD_MS / 6;
    const now = arc(dance(0));
    const later = arc(dance(sixth));
    for (let i = 0; i < 5; i++) expect(later[i]).toEqual(now[i + 1]);
  });

  it('without danceStartedAt the sweep starts at stateSince', () => {
    const a = renderRing(input({ state: 'dance', stateSince: T, now: T + 300 }));
    expect(arc(a)).toEqual(arc(dance(300)));
  });

  it('pixels 6-11 are exactly what they would be in any other state', () => {
    const extra: Partial<RingInput> = {
      toggles: { kid_mode: true, smart_mode: true },
      facePresent: true,
      listening: true,
    };
    for (const elapsed of [0, 100, 650, 1199]) {
      const right = dance(elapsed, extra).slice(6);
      expect(right).toEqual(renderRing(input({ state: 'idle', now: T + elapsed, ...extra })).slice(6));
      expect(right).toEqual([YELLOW, OFF, [220, 80, 80], [168, 80, 0], OFF, [255, 0, 0]]);
    }
  });
});

describe('face pip (pixel 6)', () => {
  const pip = (overrides: Partial<RingInput>) => renderRing(input(overrides))[6];

  it('off without a face, yellow with one', () => {
    expect(pip({ facePresent: false })).toEqual(OFF);
    expect(pip({ facePresent: true })).toEqual(YELLOW);
  });

  it('green at 0 and 3999 ms after set_face_identified, yellow at 4000', () => {
    const id = T;
    expect(pip({ facePresent: true, faceIdentifiedAt: id, now: id })).toEqual(GREEN);
    expect(pip({ facePresent: true, faceIdentifiedAt: id, now: id + 3999 })).toEqual(GREEN);
    expect(pip({ facePresent: true, faceIdentifiedAt: id, now: id + 4000 })).toEqual(YELLOW);
  });

  it('a refresh restarts the 4000 ms', () => {
    expect(pip({ facePresent: true, faceIdentifiedAt: T + 3000, now: T + 6999 })).toEqual(GREEN);
    expect(pip({ facePresent: true, faceIdentifiedAt: T + 3000, now: T + 7000 })).toEqual(YELLOW);
  });

  it('after the timeout with no face: off', () => {
    expect(pip({ facePresent: false, faceLostAt: T + 3999, faceIdentifiedAt: T, now: T + 4000 })).toEqual(
      OFF,
    );
  });

  it('flicker grace: face gone 1499 ms keeps green, 1500 ms falls to off', () => {
    const lost = T + 1000;
    const base = { facePresent: false, faceIdentifiedAt: T, faceLostAt: lost };
    expect(pip({ ...base, now: lost })).toEqual(GREEN);
    expect(pip({ ...base, now: lost + 1499 })).toEqual(GREEN);
    expect(pip({ ...base, now: lost + 1500 })).toEqual(OFF);
  });

  it('the grace never outlives the 4000 ms identification', () => {
    expect(pip({ facePresent: false, faceIdentifiedAt: T, faceLostAt: T + 3500, now: T + 4000 })).toEqual(
      OFF,
    );
  });

  it('the face coming back inside the grace stays green; identification without a face is off', () => {
    expect(pip({ facePresent: true, faceIdentifiedAt: T, faceLostAt: T + 500, now: T + 1000 })).toEqual(
      GREEN,
    );
    expect(pip({ facePresent: false, faceIdentifiedAt: T, now: T + 10 })).toEqual(OFF);
  });

  it('no identification: the grace does not apply (face gone → off at once)', () => {
    expect(pip({ facePresent: false, faceLostAt: T, now: T + 1 })).toEqual(OFF);
  });
});

describe('right-ring indicators', () => {
  const combos = [false, true].flatMap((kid_mode) =>
    [false, true].flatMap((smart_mode) =>
      [false, true].flatMap((facePresent) =>
        [false, true].map((listening) => ({ kid_mode, smart_mode, facePresent, listening })),
      ),
    ),
  );

  it.each(ROBOT_STATES.flatMap((state) => combos.map((c) => ({ state, ...c }))))(
    'reserved 7 and 10 are off: $state kid=$kid_mode smart=$smart_mode face=$facePresent listening=$listening',
    (c) => {
      for (const elapsed of [0, 250, 750]) {
        const ring = renderRing(
          input({
            state: c.state,
            toggles: { kid_mode: c.kid_mode, smart_mode: c.smart_mode },
            facePresent: c.facePresent,
            faceIdentifiedAt: T,
            listening: c.listening,
            now: T + elapsed,
          }),
        );
        expect(ring[7]).toEqual(OFF);
        expect(ring[10]).toEqual(OFF);
      }
    },
  );

  it.each([
    [false, false, OFF, OFF],
    [true, false, [220, 80, 80], OFF],
    [false, true, OFF, [168, 80, 0]],
    [true, true, [220, 80, 80], [168, 80, 0]],
  ] as Array<[boolean, boolean, Rgb, Rgb]>)(
    'kid=%s smart=%s → pixel 8 %j, pixel 9 %j',
    (kid, smart, p8, p9) => {
      const ring = renderRing(input({ state: 'talk', toggles: { kid_mode: kid, smart_mode: smart } }));
      expect(ring[8]).toEqual(p8);
      expect(ring[9]).toEqual(p9);
      // The toggles touch nothing else.
      expect(ring.filter((_, i) => i !== 8 && i !== 9)).toEqual(
        renderRing(input({ state: 'talk' })).filter((_, i) => i !== 8 && i !== 9),
      );
    },
  );

  it('listening lights pixel 11 red and nothing else', () => {
    const on = renderRing(input({ state: 'talk', listening: true }));
    const off = renderRing(input({ state: 'talk', listening: false }));
    expect(on[11]).toEqual([255, 0, 0]);
    expect(off[11]).toEqual(OFF);
    expect(on.slice(0, 11)).toEqual(off.slice(0, 11));
  });

  it('the indicator hues are distinct from one another', () => {
    const hues = [YELLOW, GREEN, [220, 80, 80], [168, 80, 0], [255, 0, 0]].map((p) => p.join(','));
    expect(new Set(hues).size).toBe(hues.length);
  });

  it('every render returns fresh pixel arrays (mutating one does not leak)', () => {
    const a = renderRing(input({ state: 'talk', toggles: { kid_mode: true, smart_mode: false } }));
    a[0]![1] = 255;
    a[8]![0] = 0;
    const b = renderRing(input({ state: 'talk', toggles: { kid_mode: true, smart_mode: false } }));
    expect(b[0]).toEqual([0, 60, 0]);
    expect(b[8]).toEqual([220, 80, 80]);
    expect(STATE_COLORS.talk).toEqual([0, 60, 0]);
  });
});

describe('applyLedWrite (MCP LED tools: left ring only)', () => {
  const ring: Rgb[] = six([1, 2, 3]);

  it.each([0, 1, 2, 3, 4, 5])('index %i is written; the input ring is not mutated', (index) => {
    const result = applyLedWrite(ring, index, [10, 20, 30]);
    expect(result.ok).toBe(true);
    expect(result.ring[index]).toEqual([10, 20, 30]);
    expect(result.ring.filter((_, i) => i !== index)).toEqual(six([1, 2, 3]).slice(1));
    expect(ring).toEqual(six([1, 2, 3]));
  });

  it.each([6, 7, 8, 9, 10, 11])('index %i (right ring) is rejected and nothing changes', (index) => {
    const result = applyLedWrite(ring, index, [10, 20, 30]);
    expect(result).toEqual({
      ok: false,
      ring: six([1, 2, 3]),
      error: {
        code: 'right_ring',
        message: `Pixel ${index} belongs to the right ring and cannot be written`,
      },
    });
  });

  it.each([-1, 12, 2.5, Number.NaN])('index %s is invalid', (index) => {
    const result = applyLedWrite(ring, index, [10, 20, 30]);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.code).toBe('invalid_index');
    expect(result.ring).toEqual(six([1, 2, 3]));
  });

  it('channels are rounded and clamped to 0-255', () => {
    expect(applyLedWrite(ring, 0, [300, -5, 12.6]).ring[0]).toEqual([255, 0, 13]);
  });

  it('applyLedWrites is all or nothing', () => {
    const good = applyLedWrites(ring, [
      { index: 0, rgb: [9, 9, 9] },
      { index: 5, rgb: [7, 7, 7] },
    ]);
    expect(good.ok).toBe(true);
    expect(good.ring[0]).toEqual([9, 9, 9]);
    expect(good.ring[5]).toEqual([7, 7, 7]);
    const bad = applyLedWrites(ring, [
      { index: 0, rgb: [9, 9, 9] },
      { index: 6, rgb: [7, 7, 7] },
    ]);
    expect(bad.ok).toBe(false);
    expect(bad.ring).toEqual(six([1, 2, 3]));
  });
});
