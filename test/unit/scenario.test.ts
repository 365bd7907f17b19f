// Scenarios for the virtual robot: parseScenario's validation, and runScenario driving a VirtualRobot that is
// not connected (its perception events are counted in stats.eventsDropped instead of sent) on a manual clock.
import { afterEach, describe, expect, it } from 'vitest';
import { VirtualRobot } from '../../src/device/robot.js';
import {
  MAX_SCENARIO_MS,
  MAX_SCENARIO_STEPS,
  parseScenario,
  runScenario,
  ScenarioError,
  type ScenarioStep,
} from '../../src/device/scenario.js';
import { ManualClock } from '../support/fake-clock.js';

/** Lets promise callbacks run (runScenario settles through them). */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Captures the error parseScenario throws (failing the test when it throws none). */
function parseError(json: unknown): ScenarioError {
  try {
    parseScenario(json);
  } catch (error) {
    expect(error).toBeInstanceOf(ScenarioError);
    return error as ScenarioError;
  }
  throw new Error('parseScenario accepted an invalid scenario');
}

const T0 = 50_000;
const GRACE_MS = 300;
const robots: VirtualRobot[] = [];

function makeRobot() {
  const clock = new ManualClock(T0);
  const robot = new VirtualRobot({ otaUrl: 'http://127.0.0.1:9/', clock, faceLostGraceMs: GRACE_MS });
  robots.push(robot);
  return { robot, clock };
}

afterEach(() => {
  for (const robot of robots.splice(0)) robot.firmware.stop();
});

/** Tracks a run's outcome without awaiting it. */
function track(run: Promise<void>) {
  const outcome: { settled: boolean; error: unknown } = { settled: false, error: undefined };
  run.then(
    () => {
      outcome.settled = true;
    },
    (error: unknown) => {
      outcome.settled = true;
      outcome.error = error ?? new Error('rejected without a reason');
    },
  );
  return outcome;
}

const FACE_1_TO_5: ScenarioStep[] = [
  { at: 1000, action: 'face_appears', name: 'Ann' },
  { at: 5000, action: 'face_leaves' },
];

describe('parseScenario', () => {
  it('accepts a valid scenario and returns its steps sorted by `at`, ties in input order', () => {
    const steps = parseScenario([
      { at: 5000, action: 'face_leaves' },
      { at: 1000, action: 'face_appears', name: 'Ann' },
      { at: 2000, action: 'sound', direction: 'left', balance: -0.7, energy: 0.4 },
      { at: 2000, action: 'head_pet_start' },
      { at: 0, action: 'wait' },
      { at: 2000, action: 'head_pet_end' },
      { at: 3000, action: 'say', text: 'hello there' },
      { at: 3500, action: 'listen_detect', text: 'hey pip' },
    ]);
    expect(steps).toEqual([
      { at: 0, action: 'wait' },
      { at: 1000, action: 'face_appears', name: 'Ann' },
      { at: 2000, action: 'sound', direction: 'left', balance: -0.7, energy: 0.4 },
      { at: 2000, action: 'head_pet_start' },
      { at: 2000, action: 'head_pet_end' },
      { at: 3000, action: 'say', text: 'hello there' },
      { at: 3500, action: 'listen_detect', text: 'hey pip' },
      { at: 5000, action: 'face_leaves' },
    ]);
  });

  it('accepts {steps: [...]} as well as a bare array', () => {
    expect(parseScenario({ steps: FACE_1_TO_5 })).toEqual(FACE_1_TO_5);
    expect(parseScenario([])).toEqual([]);
  });

  it('a bad action: names the step index and the field "action", and shows the bad value', () => {
    const error = parseError([
      { at: 0, action: 'face_appears' },
      { at: 10, action: 'jump' },
    ]);
    expect(error.step).toBe(1);
    expect(error.field).toBe('action');
    expect(error.message).toMatch(/step 1 field "action"/);
    expect(error.message).toContain('"jump"');
    expect(error.message).toContain('face_appears'); // the allowed actions are listed
  });

  it('a negative `at`: names the step and the field "at"', () => {
    const error = parseError([
      { at: 0, action: 'wait' },
      { at: 1, action: 'wait' },
      { at: -5, action: 'face_leaves' },
    ]);
    expect(error.step).toBe(2);
    expect(error.field).toBe('at');
    expect(error.message).toMatch(/step 2 field "at"/);
    expect(error.message).toContain('-5');
  });

  it('`at` must be a finite number no later than one hour', () => {
    expect(parseError([{ at: MAX_SCENARIO_MS + 1, action: 'wait' }]).field).toBe('at');
    expect(parseError([{ at: Number.POSITIVE_INFINITY, action: 'wait' }]).field).toBe('at');
    expect(parseError([{ at: '100', action: 'wait' }]).field).toBe('at');
    expect(parseError([{ action: 'wait' }]).field).toBe('at');
    expect(parseScenario([{ at: MAX_SCENARIO_MS, action: 'wait' }])).toHaveLength(1);
  });

  it(`more than ${MAX_SCENARIO_STEPS} steps is refused; exactly ${MAX_SCENARIO_STEPS} is fine`, () => {
    const steps = (n: number) => Array.from({ length: n }, (_, i) => ({ at: i, action: 'wait' }));
    const error = parseError(steps(MAX_SCENARIO_STEPS + 1));
    expect(error.message).toContain(String(MAX_SCENARIO_STEPS + 1));
    expect(error.message).toContain(String(MAX_SCENARIO_STEPS));
    expect(error.step).toBeUndefined();
    expect(parseScenario(steps(MAX_SCENARIO_STEPS))).toHaveLength(MAX_SCENARIO_STEPS);
  });

  it('per-action fields: required ones must be there, others must not be', () => {
    const missingText = parseError([{ at: 0, action: 'say' }]);
    expect([missingText.step, missingText.field]).toEqual([0, 'text']);
    expect(parseError([{ at: 0, action: 'listen_detect', text: '  ' }]).field).toBe('text');
    expect(parseError([{ at: 0, action: 'sound' }]).field).toBe('direction');
    expect(parseError([{ at: 0, action: 'sound', direction: 'up' }]).field).toBe('direction');
    expect(parseError([{ at: 0, action: 'sound', direction: 'left', balance: 2 }]).field).toBe('balance');
    expect(parseError([{ at: 0, action: 'sound', direction: 'left', energy: -0.1 }]).field).toBe('energy');
    const stray = parseError([{ at: 0, action: 'face_leaves', text: 'hi' }]);
    expect([stray.field, stray.message]).toEqual(['text', expect.stringContaining('not used by action')]);
    const unknown = parseError([{ at: 0, action: 'wait', dirction: 'left' }]);
    expect([unknown.step, unknown.field]).toEqual([0, 'dirction']);
  });

  it('anything but an array (or {steps}) is refused', () => {
    for (const json of [null, 42, 'steps', { at: 0, action: 'wait' }, { steps: 'x' }]) {
      expect(parseError(json).message).toMatch(/array/);
    }
    expect(parseError([null]).step).toBe(0);
  });
});

describe('runScenario on a VirtualRobot that is not connected', () => {
  it('a face appears at 1 s and leaves at 5 s: idle → talk at 1 s, idle again 800 ms + the grace after 5 s', async () => {
    const { robot, clock } = makeRobot();
    expect(robot.connected).toBe(false);
    const outcome = track(runScenario(robot, FACE_1_TO_5, { clock }));

    clock.advanceTo(T0 + 999);
    expect(robot.model.state).toBe('idle');
    expect(robot.stats.eventsDropped).toBe(0);
    clock.advance(1);
    expect(robot.model.state).toBe('talk');
    expect(robot.firmware.facePresent).toBe(true);
    expect(robot.stats.eventsDropped).toBe(2); // face_detected, state_changed

    clock.advanceTo(T0 + 4999);
    await flush();
    expect(outcome.settled).toBe(false); // the last step is still to come
    clock.advance(1);
    await flush();
    expect(outcome).toEqual({ settled: true, error: undefined }); // resolved after the last step

    clock.advanceTo(T0 + 5000 + 800 + GRACE_MS - 1);
    expect(robot.model.state).toBe('talk');
    expect(robot.firmware.facePresent).toBe(false); // face_lost was reported at +800
    clock.advance(1);
    expect(robot.model.state).toBe('idle');
    // face_detected, state_changed, face_recognized, face_lost, state_changed: dropped, not sent.
    expect(robot.stats.eventsDropped).toBe(5);
  });

  it("runs on the robot's own firmware clock when no clock is given", async () => {
    const { robot, clock } = makeRobot();
    const outcome = track(runScenario(robot, FACE_1_TO_5));
    clock.advance(999);
    expect(robot.model.state).toBe('idle');
    clock.advance(1);
    expect(robot.model.state).toBe('talk');
    clock.advance(4000 + 800 + GRACE_MS);
    await flush();
    expect(robot.model.state).toBe('idle');
    expect(outcome).toEqual({ settled: true, error: undefined });
  });

  it('one advance() plays the whole script, each step at its own time', () => {
    const { robot, clock } = makeRobot();
    void runScenario(robot, FACE_1_TO_5, { clock });
    clock.advance(5000 + 800 + GRACE_MS - 1); // the leave at 5000 must start its 800 ms at 5000, not later
    expect(robot.model.state).toBe('talk');
    clock.advance(1);
    expect(robot.model.state).toBe('idle');
  });

  it('steps at the same time run in their given order', () => {
    const { robot, clock } = makeRobot();
    void runScenario(
      robot,
      [
        { at: 1000, action: 'face_appears' },
        { at: 1000, action: 'face_leaves' },
      ],
      { clock },
    );
    clock.advance(1000);
    expect(robot.firmware.facePresent).toBe(true);
    clock.advance(800);
    expect(robot.firmware.facePresent).toBe(false); // appears, then leaves (reversed, the face would stay)
  });

  it('sound and head-pet steps reach the firmware', async () => {
    const { robot, clock } = makeRobot();
    const outcome = track(
      runScenario(
        robot,
        [
          { at: 100, action: 'sound', direction: 'right' },
          { at: 200, action: 'head_pet_start' },
          { at: 2500, action: 'head_pet_end' },
        ],
        { clock },
      ),
    );
    clock.advance(100);
    expect(robot.stats.eventsDropped).toBe(1); // sound_event
    clock.advance(100);
    expect(robot.stats.eventsDropped).toBe(2); // head_pet_started
    clock.advance(1999);
    expect(robot.model.state).toBe('idle');
    clock.advance(1);
    expect(robot.model.state).toBe('talk'); // a 2 s hold opens listening
    clock.advance(300);
    await flush();
    expect(robot.stats.eventsDropped).toBe(4); // + state_changed, head_pet_ended
    expect(outcome).toEqual({ settled: true, error: undefined });
  });

  it('abort stops the remaining steps and rejects with the abort reason', async () => {
    const { robot, clock } = makeRobot();
    const controller = new AbortController();
    const outcome = track(runScenario(robot, FACE_1_TO_5, { clock, signal: controller.signal }));
    clock.advance(2000);
    expect(robot.model.state).toBe('talk');
    controller.abort();
    await flush();
    expect(outcome.settled).toBe(true);
    expect((outcome.error as Error).name).toBe('AbortError');
    robot.firmware.stop(); // drops the firmware's own timers (repaint, face_recognized)
    expect(clock.pendingTimers).toBe(0); // no scenario timer left behind either
    clock.advance(60_000);
    expect(robot.firmware.facePresent).toBe(true); // the 5 s face_leaves never ran
    expect(robot.model.state).toBe('talk');
  });

  it('an already-aborted signal runs no step at all', async () => {
    const { robot, clock } = makeRobot();
    const run = runScenario(robot, [{ at: 0, action: 'face_appears' }], {
      clock,
      signal: AbortSignal.abort(),
    });
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    clock.advance(1000);
    expect(robot.firmware.facePresent).toBe(false);
  });

  it('say / listen_detect need a connected robot: the run fails naming the step, later steps do not run', async () => {
    for (const step of [
      { at: 100, action: 'say', text: 'hello' },
      { at: 100, action: 'listen_detect', text: 'hey pip' },
    ] satisfies ScenarioStep[]) {
      const { robot, clock } = makeRobot();
      const run = runScenario(robot, [{ at: 0, action: 'wait' }, step, { at: 200, action: 'face_appears' }], {
        clock,
      });
      clock.advance(100);
      const error = await run.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ScenarioError);
      expect((error as Error).message).toMatch(
        new RegExp(`step 1 \\(${step.action} at 100 ms\\).*not connected`),
      );
      clock.advance(1000);
      expect(robot.firmware.facePresent).toBe(false);
    }
  });

  it('an invalid step list is refused before anything runs', () => {
    const { robot, clock } = makeRobot();
    expect(() => runScenario(robot, [{ at: -1, action: 'face_appears' } as ScenarioStep], { clock })).toThrow(
      ScenarioError,
    );
    clock.advance(1000);
    expect(robot.firmware.facePresent).toBe(false);
  });

  it('an empty scenario resolves at once', async () => {
    const { robot, clock } = makeRobot();
    await expect(runScenario(robot, [], { clock })).resolves.toBeUndefined();
  });
});
