// Scenarios for the virtual robot: a timed script of what the robot senses (a face, a sound, a head pet)
// and hears (speech, a wake word), e.g. "a face appears at 1 s and leaves at 5 s". parseScenario validates a
// JSON script; runScenario plays it on a Clock (by default the firmware's own, so a fake clock drives both
// the script and the firmware's timers).
import { z } from 'zod';
import type { Clock } from '../audio/pacer.js';
import type { VirtualRobot } from './robot.js';

export const SCENARIO_ACTIONS = [
  'face_appears',
  'face_leaves',
  'sound',
  'head_pet_start',
  'head_pet_end',
  'say',
  'listen_detect',
  'wait',
] as const;
export type ScenarioAction = (typeof SCENARIO_ACTIONS)[number];

export const SOUND_DIRECTIONS = ['left', 'right', 'center'] as const;
export type SoundDirection = (typeof SOUND_DIRECTIONS)[number];

/** At most this many steps in one scenario. */
export const MAX_SCENARIO_STEPS = 500;
/** No step later than this (ms from the start): one hour. */
export const MAX_SCENARIO_MS = 3_600_000;
/** Longest `text` of a say / listen_detect step. */
export const MAX_SCENARIO_TEXT = 1000;
/** Energy of a sound step that gives none (0-1). */
export const DEFAULT_SOUND_ENERGY = 0.5;

export interface ScenarioStep {
  /** ms from the start of the scenario. */
  at: number;
  action: ScenarioAction;
  /** face_appears: the recognised person (face_recognized follows); none = an unknown face. */
  name?: string;
  /** sound: where it came from. */
  direction?: SoundDirection;
  /** sound: -1 (left) to 1 (right); default -1, 1 or 0 by direction. */
  balance?: number;
  /** sound: 0-1; default DEFAULT_SOUND_ENERGY. */
  energy?: number;
  /** say: what is spoken into the microphone; listen_detect: the wake word. */
  text?: string;
}

export interface ScenarioIssue {
  /** Index of the bad step in the input array (undefined for problems with the whole scenario). */
  step: number | undefined;
  /** The bad field of that step (undefined when the step as a whole is bad). */
  field: string | undefined;
  message: string;
}

/** A scenario that does not validate, or a step that failed while running. */
export class ScenarioError extends Error {
  override name = 'ScenarioError';
  /** The first problem's step index and field (parse errors). */
  readonly step: number | undefined;
  readonly field: string | undefined;

  constructor(
    message: string,
    readonly issues: ScenarioIssue[] = [],
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.step = issues[0]?.step;
    this.field = issues[0]?.field;
  }
}

/** The fields each action reads; any other optional field on the step is a mistake. */
const FIELDS: Readonly<Record<ScenarioAction, readonly OptionalField[]>> = {
  face_appears: ['name'],
  face_leaves: [],
  sound: ['direction', 'balance', 'energy'],
  head_pet_start: [],
  head_pet_end: [],
  say: ['text'],
  listen_detect: ['text'],
  wait: [],
};
type OptionalField = 'name' | 'direction' | 'balance' | 'energy' | 'text';
const REQUIRED: Partial<Record<ScenarioAction, OptionalField>> = {
  sound: 'direction',
  say: 'text',
  listen_detect: 'text',
};

const stepSchema = z
  .strictObject({
    at: z.number().nonnegative().max(MAX_SCENARIO_MS),
    action: z.enum(SCENARIO_ACTIONS),
    name: z.string().trim().min(1).max(100).optional(),
    direction: z.enum(SOUND_DIRECTIONS).optional(),
    balance: z.number().min(-1).max(1).optional(),
    energy: z.number().min(0).max(1).optional(),
    text: z.string().trim().min(1).max(MAX_SCENARIO_TEXT).optional(),
  })
  .superRefine((step, ctx) => {
    const allowed = FIELDS[step.action];
    for (const field of ['name', 'direction', 'balance', 'energy', 'text'] as const) {
      if (step[field] !== undefined && !allowed.includes(field)) {
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: `not used by action "${step.action}"`,
        });
      }
    }
    const required = REQUIRED[step.action];
    if (required && step[required] === undefined) {
      ctx.addIssue({ code: 'custom', path: [required], message: `required by action "${step.action}"` });
    }
  });

const MAX_REPORTED_ISSUES = 5;

/**
 * Validates a scenario: an array of steps, or `{steps: [...]}`. Returns the steps sorted by `at` (steps at
 * the same time keep their order). Throws ScenarioError naming the bad step's index (in the input) and field.
 */
export function parseScenario(json: unknown): ScenarioStep[] {
  return validate(json).map(({ step }) => step);
}

interface Indexed {
  step: ScenarioStep;
  /** Position in the input array. */
  index: number;
}

function validate(json: unknown): Indexed[] {
  const list =
    typeof json === 'object' && json !== null && !Array.isArray(json) && 'steps' in json
      ? (json as { steps: unknown }).steps
      : json;
  if (!Array.isArray(list)) {
    throw new ScenarioError('a scenario is an array of steps (or an object with a "steps" array)', [
      { step: undefined, field: undefined, message: 'not an array' },
    ]);
  }
  if (list.length > MAX_SCENARIO_STEPS) {
    const message = `a scenario has at most ${MAX_SCENARIO_STEPS} steps; this one has ${list.length}`;
    throw new ScenarioError(message, [{ step: undefined, field: undefined, message }]);
  }
  const issues: ScenarioIssue[] = [];
  const steps: Indexed[] = [];
  list.forEach((raw, index) => {
    const parsed = stepSchema.safeParse(raw);
    if (parsed.success) {
      steps.push({ step: parsed.data, index });
      return;
    }
    for (const issue of parsed.error.issues) {
      const keys = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : undefined;
      const field = issue.path.length > 0 ? issue.path.map(String).join('.') : keys;
      const got = gotValue(raw, issue.path[0]);
      issues.push({ step: index, field, message: `${issue.message}${got}` });
    }
  });
  if (issues.length > 0) {
    const shown = issues
      .slice(0, MAX_REPORTED_ISSUES)
      .map((issue) => `step ${issue.step}${issue.field ? ` field "${issue.field}"` : ''}: ${issue.message}`);
    const more =
      issues.length > MAX_REPORTED_ISSUES ? ` (and ${issues.length - MAX_REPORTED_ISSUES} more)` : '';
    throw new ScenarioError(`invalid scenario: ${shown.join('; ')}${more}`, issues);
  }
  // Array.prototype.sort is stable: steps at the same time keep their input order.
  return steps.sort((a, b) => a.step.at - b.step.at);
}

function gotValue(raw: unknown, key: PropertyKey | undefined): string {
  if (typeof key !== 'string' || typeof raw !== 'object' || raw === null || !(key in raw)) return '';
  const value = (raw as Record<string, unknown>)[key];
  if (typeof value === 'object' && value !== null) return '';
  const text = typeof value === 'number' && !Number.isFinite(value) ? String(value) : JSON.stringify(value);
  return text === undefined ? '' : ` (got ${text.length > 60 ? `${text.slice(0, 57)}...` : text})`;
}

export interface RunScenarioOptions {
  /** Time base of `at`; default the robot's firmware clock (else a monotonic clock). */
  clock?: Clock;
  /** Aborting stops the remaining steps; the promise then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Called just before each step runs. */
  onStep?: (step: ScenarioStep, index: number) => void;
}

/**
 * Plays the steps on the clock: each runs `at` ms after the call (steps at the same time run in order, at
 * once). A `say` step is awaited (it encodes and sends speech); steps that fall due meanwhile run right after
 * it. Resolves once the last step has run; rejects with a ScenarioError when a step fails (e.g. `say` or
 * `listen_detect` while the robot is not connected) and with the abort reason when `signal` aborts, and in
 * both cases runs no further step. The steps are validated as parseScenario does.
 */
export function runScenario(
  robot: VirtualRobot,
  steps: readonly ScenarioStep[],
  options: RunScenarioOptions = {},
): Promise<void> {
  const ordered = validate(steps);
  const clock = options.clock ?? robot.firmware.clock;
  const { signal } = options;
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const start = clock.now();
    let next = 0;
    let timer: unknown;
    let settled = false;

    const finish = (error?: unknown) => {
      if (settled) return;
      settled = true;
      if (timer !== undefined) clock.clearTimer(timer);
      timer = undefined;
      signal?.removeEventListener('abort', onAbort);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onAbort = () => finish(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });

    const fail = (item: Indexed, error: unknown) =>
      finish(
        new ScenarioError(
          `scenario step ${item.index} (${item.step.action} at ${item.step.at} ms) failed: ${
            error instanceof Error ? error.message : String(error)
          }`,
          [],
          { cause: error },
        ),
      );

    /** Runs every step due by `floor` ms (or by the clock, if later), then arms the timer for the next. */
    const runDue = (floor: number) => {
      while (!settled && next < ordered.length) {
        const item = ordered[next]!;
        if (item.step.at > Math.max(floor, clock.now() - start)) break;
        next++;
        let result: Promise<void> | undefined;
        try {
          options.onStep?.(item.step, item.index);
          result = perform(robot, item.step);
        } catch (error) {
          fail(item, error);
          return;
        }
        if (result) {
          // Synchronous steps chain synchronously, so a fake clock's advance() fires the whole script.
          result.then(
            () => runDue(floor),
            (error: unknown) => fail(item, error),
          );
          return;
        }
      }
      if (settled) return;
      if (next >= ordered.length) {
        finish();
        return;
      }
      const due = ordered[next]!.step.at;
      timer = clock.setTimer(
        () => {
          timer = undefined;
          // The timer fired for `due`: run it even if the clock reads a hair early.
          runDue(due);
        },
        Math.max(0, start + due - clock.now()),
      );
    };

    runDue(Number.NEGATIVE_INFINITY);
  });
}

/** One step; returns a promise only for the steps that take time (say). */
function perform(robot: VirtualRobot, step: ScenarioStep): Promise<void> | undefined {
  const firmware = robot.firmware;
  switch (step.action) {
    case 'face_appears':
      firmware.faceAppears(step.name);
      return undefined;
    case 'face_leaves':
      firmware.faceLeaves();
      return undefined;
    case 'sound': {
      const direction = step.direction ?? 'center';
      const balance = step.balance ?? (direction === 'left' ? -1 : direction === 'right' ? 1 : 0);
      firmware.hearSound(direction, balance, step.energy ?? DEFAULT_SOUND_ENERGY);
      return undefined;
    }
    case 'head_pet_start':
      firmware.headPetStart();
      return undefined;
    case 'head_pet_end':
      firmware.headPetEnd();
      return undefined;
    case 'say':
      requireConnected(robot);
      return robot.say(requireText(step));
    case 'listen_detect':
      requireConnected(robot);
      robot.listen('detect', 'auto', requireText(step));
      return undefined;
    case 'wait':
      return undefined;
  }
}

function requireConnected(robot: VirtualRobot): void {
  if (!robot.connected) throw new Error('the robot is not connected (connect it before a say/listen step)');
}

function requireText(step: ScenarioStep): string {
  if (!step.text) throw new Error(`a ${step.action} step needs "text"`);
  return step.text;
}

/**
 * The clock the robot's firmware runs on. Firmware keeps it private, so this reads the field at run time
 * (a public getter on Firmware would make this typed); falls back to undefined when it is not a Clock.
 */
