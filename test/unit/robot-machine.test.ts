// The robot state machine (SPEC "States and transitions", DESIGN §3): pure robotStep(state, event, config).
// The exit rules are written out here from SPEC, not read from the module under test; a completeness
// sweep then checks that no other (state, trigger) pair moves the robot, and a fast-check run over random
// event sequences checks Rules 1-3.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_FACE_LOST_GRACE_MS,
  findTransition,
  initialRobotState,
  ROBOT_TRANSITIONS,
  type RobotEffect,
  type RobotEvent,
  type RobotMachineState,
  robotStep,
  STATE_BEHAVIOUR,
} from '../../src/robot/machine.js';
import { matchPhrase, phraseTable } from '../../src/robot/phrases.js';
import { ROBOT_STATES, type RobotState } from '../../src/robot/states.js';

const config = { faceLostGraceMs: DEFAULT_FACE_LOST_GRACE_MS };
const T0 = 1_000;
const NOW = 50_000;

function at(current: RobotState, overrides: Partial<RobotMachineState> = {}): RobotMachineState {
  return { current, since: T0, facePresent: false, ...overrides };
}

/** A talk state whose face-lost grace timer is running (face lost at 40 000). */
const TALK_GRACE = at('talk', { facePresent: false, faceLostAt: 40_000, graceTimerStartedAt: 40_000 });

const changes = (effects: RobotEffect[]) => effects.filter((e) => e.type === 'state_changed');

type Trigger = Exclude<RobotEvent['type'], 'set_state'>;

interface ExitRow {
  from: RobotState;
  trigger: string;
  /** The state the row starts from (defaults to `at(from)`). */
  before?: RobotMachineState;
  event: RobotEvent;
  to: RobotState;
  /** Expected effects other than exit / state_changed / enter, placed before them. */
  extra?: RobotEffect[];
}

// SPEC "States and transitions", exit-rule table, one row per (from, trigger). Voice phrases are
// spoken text run through matchPhrase, so the rows also pin the phrase table to the machine.
const say = (text: string, from: RobotState): RobotEvent => {
  const match = matchPhrase(text, from, 'Pip', ['Happy Birthday']);
  if (!match) throw new Error(`no phrase in "${text}" from ${from}`);
  return {
    type: 'voice_phrase',
    now: NOW,
    target: match.target,
    ...(match.song ? { song: match.song } : {}),
  };
};

const SPEC_EXITS: ExitRow[] = [
  // idle → talk: firmware face_detected, or voice listening start (wake word, inject-text, head-pet hold)
  { from: 'idle', trigger: 'face_detected', event: { type: 'face_detected', now: NOW }, to: 'talk' },
  {
    from: 'idle',
    trigger: 'face_detected (face already known present)',
    before: at('idle', { facePresent: true }),
    event: { type: 'face_detected', now: NOW },
    to: 'talk',
  },
  ...(['wake_word', 'inject_text', 'head_pet_hold'] as const).map(
    (source): ExitRow => ({
      from: 'idle',
      trigger: `voice_listening_start (${source})`,
      event: { type: 'voice_listening_start', now: NOW, source },
      to: 'talk',
    }),
  ),
  // talk → idle: face-lost grace expired, or voice standby
  {
    from: 'talk',
    trigger: 'face_lost_grace_expired',
    before: TALK_GRACE,
    event: { type: 'face_lost_grace_expired', now: 48_000, startedAt: 40_000 },
    to: 'idle',
  },
  { from: 'talk', trigger: 'voice_standby', event: { type: 'voice_standby', now: NOW }, to: 'idle' },
  {
    from: 'talk',
    trigger: 'voice_standby (grace timer running)',
    before: TALK_GRACE,
    event: { type: 'voice_standby', now: NOW },
    to: 'idle',
    extra: [{ type: 'cancel_face_lost_timer' }],
  },
  // idle, talk → sleep on the sleep phrase
  { from: 'idle', trigger: 'phrase "goodnight Pip"', event: say('Goodnight Pip!', 'idle'), to: 'sleep' },
  { from: 'talk', trigger: 'phrase "go to sleep"', event: say('please go to sleep', 'talk'), to: 'sleep' },
  // sleep → idle: face detected, voice listening, or head pet
  { from: 'sleep', trigger: 'face_detected', event: { type: 'face_detected', now: NOW }, to: 'idle' },
  {
    from: 'sleep',
    trigger: 'voice_listening_start',
    event: { type: 'voice_listening_start', now: NOW, source: 'wake_word' },
    to: 'idle',
  },
  { from: 'sleep', trigger: 'head_pet', event: { type: 'head_pet', now: NOW }, to: 'idle' },
  // idle → security on the security phrase
  { from: 'idle', trigger: 'phrase "keep watch"', event: say('keep watch', 'idle'), to: 'security' },
  // security → idle: voice wake phrase, or face_detected
  { from: 'security', trigger: 'phrase "wake up"', event: say('wake up', 'security'), to: 'idle' },
  { from: 'security', trigger: 'face_detected', event: { type: 'face_detected', now: NOW }, to: 'idle' },
  // idle, talk → story_time on the story phrase
  { from: 'idle', trigger: 'phrase "story time"', event: say('Story time!', 'idle'), to: 'story_time' },
  {
    from: 'talk',
    trigger: 'phrase "tell me a story"',
    event: say('can you tell me a story', 'talk'),
    to: 'story_time',
  },
  // story_time → idle: the end / stop story, or 90 s of silence
  { from: 'story_time', trigger: 'phrase "the end"', event: say('The end.', 'story_time'), to: 'idle' },
  { from: 'story_time', trigger: 'phrase "stop story"', event: say('stop story', 'story_time'), to: 'idle' },
  {
    from: 'story_time',
    trigger: 'story_silence_expired',
    event: { type: 'story_silence_expired', now: NOW },
    to: 'idle',
  },
  // idle, talk → dance on "dance" or a song name
  { from: 'idle', trigger: 'phrase "dance"', event: say("let's dance", 'idle'), to: 'dance' },
  { from: 'talk', trigger: 'phrase "dance"', event: say('dance for me', 'talk'), to: 'dance' },
  { from: 'talk', trigger: 'song name', event: say('play happy birthday', 'talk'), to: 'dance' },
  // dance → idle when the choreography ends
  {
    from: 'dance',
    trigger: 'choreography_ended',
    event: { type: 'choreography_ended', now: NOW },
    to: 'idle',
  },
];

// The phrase table (SPEC Rule 4 table, src/robot/phrases.ts) also allows these two, which the exit
// table does not list: a spoken phrase arrives in talk, and a wake phrase works while asleep.
const PHRASE_TABLE_EXITS: ExitRow[] = [
  { from: 'talk', trigger: 'phrase "security mode"', event: say('security mode', 'talk'), to: 'security' },
  { from: 'sleep', trigger: 'phrase "are you there"', event: say('are you there?', 'sleep'), to: 'idle' },
];

function enterEffect(row: ExitRow): RobotEffect {
  const song = row.event.type === 'voice_phrase' ? row.event.song : undefined;
  return song ? { type: 'enter', state: row.to, song } : { type: 'enter', state: row.to };
}

describe('exit rules (SPEC exit-rule table)', () => {
  it.each([...SPEC_EXITS, ...PHRASE_TABLE_EXITS])('$from --$trigger--> $to', (row) => {
    const before = row.before ?? at(row.from);
    const { state, effects } = robotStep(before, row.event, config);
    expect(state.current).toBe(row.to);
    expect(state.since).toBe(row.event.now);
    expect(effects).toEqual([
      ...(row.extra ?? []),
      { type: 'exit', state: row.from },
      { type: 'state_changed', from: row.from, to: row.to, reason: row.event.type },
      enterEffect(row),
    ]);
  });

  it('a dance chosen by song name carries the song on enter', () => {
    const { effects } = robotStep(at('idle'), say('Happy Birthday please', 'idle'), config);
    expect(effects).toContainEqual({ type: 'enter', state: 'dance', song: 'Happy Birthday' });
  });

  it('leaving talk by a phrase while the grace timer runs cancels it first', () => {
    const { state, effects } = robotStep(TALK_GRACE, say('go to sleep', 'talk'), config);
    expect(state.current).toBe('sleep');
    expect(state.graceTimerStartedAt).toBeUndefined();
    expect(effects[0]).toEqual({ type: 'cancel_face_lost_timer' });
  });

  it('the machine sees the face appear when it leaves security or sleep on face_detected', () => {
    for (const from of ['security', 'sleep'] as const) {
      const { state } = robotStep(at(from), { type: 'face_detected', now: NOW }, config);
      expect(state).toEqual({ current: 'idle', since: NOW, facePresent: true });
    }
  });
});

// Every event kind (voice_phrase with each of the six targets) from every state, with a running grace
// timer in talk so the grace row can fire. Exactly the rows above move the robot; nothing else does.
describe('completeness: no transition outside the table', () => {
  const allowed = new Set(
    [...SPEC_EXITS, ...PHRASE_TABLE_EXITS].map((row) => `${row.from}|${key(row.event)}|${row.to}`),
  );
  function key(event: RobotEvent): string {
    return event.type === 'voice_phrase' ? `voice_phrase:${event.target}` : event.type;
  }
  const events: RobotEvent[] = [
    { type: 'face_detected', now: NOW },
    { type: 'face_lost', now: NOW },
    { type: 'face_lost_grace_expired', now: NOW },
    { type: 'voice_listening_start', now: NOW },
    { type: 'voice_standby', now: NOW },
    { type: 'head_pet', now: NOW },
    { type: 'choreography_ended', now: NOW },
    { type: 'story_silence_expired', now: NOW },
    ...ROBOT_STATES.map((target): RobotEvent => ({ type: 'voice_phrase', now: NOW, target })),
  ];
  const cases = ROBOT_STATES.flatMap((from) => events.map((event) => ({ from, event, name: key(event) })));

  it.each(cases)('$from + $name', ({ from, event }) => {
    const before = from === 'talk' ? TALK_GRACE : at(from);
    const { state, effects } = robotStep(before, event, config);
    const moved = state.current !== from;
    expect(moved).toBe(allowed.has(`${from}|${key(event)}|${state.current}`));
    if (!moved) {
      expect(state.since).toBe(T0);
      expect(changes(effects)).toEqual([]);
      expect(effects.filter((e) => e.type === 'enter' || e.type === 'exit')).toEqual([]);
    }
  });

  it('every (from, trigger) pair of the SPEC rows does move the robot', () => {
    for (const row of SPEC_EXITS) {
      expect(allowed.has(`${row.from}|${key(row.event)}|${row.to}`)).toBe(true);
      const before = row.before ?? at(row.from);
      expect(robotStep(before, row.event, config).state.current).toBe(row.to);
    }
  });
});

describe('camera edges outside idle and talk (Rule 2)', () => {
  const ignored: Array<{ state: RobotState; edge: 'face_detected' | 'face_lost' }> = [
    { state: 'story_time', edge: 'face_detected' },
    { state: 'story_time', edge: 'face_lost' },
    { state: 'security', edge: 'face_lost' },
    { state: 'sleep', edge: 'face_lost' },
    { state: 'dance', edge: 'face_detected' },
    { state: 'dance', edge: 'face_lost' },
  ];

  it.each(ignored)('$state ignores $edge: no transition, no effects', ({ state: current, edge }) => {
    const before = at(current, { facePresent: edge === 'face_lost' });
    const { state, effects } = robotStep(before, { type: edge, now: NOW }, config);
    expect(state.current).toBe(current);
    expect(state.since).toBe(T0);
    expect(effects).toEqual([]);
    // Only the face bookkeeping changes; no grace timer outside talk.
    expect(state.facePresent).toBe(edge === 'face_detected');
    expect(state.graceTimerStartedAt).toBeUndefined();
  });

  it('face_lost in idle stays idle and starts no timer', () => {
    const { state, effects } = robotStep(
      at('idle', { facePresent: true }),
      { type: 'face_lost', now: NOW },
      config,
    );
    expect(state).toEqual({ current: 'idle', since: T0, facePresent: false, faceLostAt: NOW });
    expect(effects).toEqual([]);
  });

  it('face_detected in talk keeps talk and has no effects when no timer runs', () => {
    const { state, effects } = robotStep(at('talk'), { type: 'face_detected', now: NOW }, config);
    expect(state).toEqual({ current: 'talk', since: T0, facePresent: true });
    expect(effects).toEqual([]);
  });
});

describe('set_state (admin)', () => {
  const pairs = ROBOT_STATES.flatMap((from) => ROBOT_STATES.map((to) => ({ from, to })));

  it.each(pairs)('$from → $to', ({ from, to }) => {
    const before = at(from);
    const { state, effects } = robotStep(before, { type: 'set_state', now: NOW, target: to }, config);
    if (from === to) {
      expect(state).toEqual(before);
      expect(effects).toEqual([]);
    } else {
      expect(state).toEqual({ ...before, current: to, since: NOW });
      expect(effects).toEqual([
        { type: 'exit', state: from },
        { type: 'state_changed', from, to, reason: 'set_state' },
        { type: 'enter', state: to },
      ]);
    }
  });

  it('an unknown target (untyped input) changes nothing', () => {
    const before = at('talk');
    const event = { type: 'set_state', now: NOW, target: 'party' } as unknown as RobotEvent;
    expect(robotStep(before, event, config)).toEqual({ state: before, effects: [] });
  });

  it('set_state out of talk cancels a running grace timer', () => {
    const { state, effects } = robotStep(
      TALK_GRACE,
      { type: 'set_state', now: NOW, target: 'dance' },
      config,
    );
    expect(state.current).toBe('dance');
    expect(state.graceTimerStartedAt).toBeUndefined();
    expect(effects.map((e) => e.type)).toEqual(['cancel_face_lost_timer', 'exit', 'state_changed', 'enter']);
  });
});

describe('face-lost grace (DESIGN §3: talk → idle FACE_LOST_GRACE_MS after face_lost)', () => {
  const talking = at('talk', { facePresent: true });

  it('face_lost in talk starts the timer with the configured grace and stays in talk', () => {
    const { state, effects } = robotStep(talking, { type: 'face_lost', now: 20_000 }, config);
    expect(state).toEqual({
      current: 'talk',
      since: T0,
      facePresent: false,
      faceLostAt: 20_000,
      graceTimerStartedAt: 20_000,
    });
    expect(effects).toEqual([{ type: 'start_face_lost_timer', ms: 8000, startedAt: 20_000 }]);
  });

  it('uses faceLostGraceMs from the config', () => {
    const { effects } = robotStep(talking, { type: 'face_lost', now: 20_000 }, { faceLostGraceMs: 2500 });
    expect(effects).toEqual([{ type: 'start_face_lost_timer', ms: 2500, startedAt: 20_000 }]);
  });

  it('a second face_lost while the timer runs does not restart it', () => {
    const first = robotStep(talking, { type: 'face_lost', now: 20_000 }, config).state;
    const { state, effects } = robotStep(first, { type: 'face_lost', now: 21_000 }, config);
    expect(effects).toEqual([]);
    expect(state.graceTimerStartedAt).toBe(20_000);
  });

  it('face_detected before expiry cancels the timer; a late expiry is then ignored', () => {
    const lost = robotStep(talking, { type: 'face_lost', now: 20_000 }, config).state;
    const back = robotStep(lost, { type: 'face_detected', now: 27_999 }, config);
    expect(back.effects).toEqual([{ type: 'cancel_face_lost_timer' }]);
    expect(back.state).toEqual({ current: 'talk', since: T0, facePresent: true });
    const late = robotStep(
      back.state,
      { type: 'face_lost_grace_expired', now: 28_000, startedAt: 20_000 },
      config,
    );
    expect(late).toEqual({ state: back.state, effects: [] });
  });

  it('expiry moves talk → idle with exactly one state_changed', () => {
    const lost = robotStep(talking, { type: 'face_lost', now: 20_000 }, config).state;
    const { state, effects } = robotStep(
      lost,
      { type: 'face_lost_grace_expired', now: 28_000, startedAt: 20_000 },
      config,
    );
    expect(state).toEqual({ current: 'idle', since: 28_000, facePresent: false, faceLostAt: 20_000 });
    expect(effects).toEqual([
      { type: 'exit', state: 'talk' },
      { type: 'state_changed', from: 'talk', to: 'idle', reason: 'face_lost_grace_expired' },
      { type: 'enter', state: 'idle' },
    ]);
  });

  it("a stale timer's expiry (earlier token) is ignored", () => {
    let s = robotStep(talking, { type: 'face_lost', now: 20_000 }, config).state;
    s = robotStep(s, { type: 'face_detected', now: 21_000 }, config).state;
    s = robotStep(s, { type: 'face_lost', now: 22_000 }, config).state;
    const stale = robotStep(s, { type: 'face_lost_grace_expired', now: 28_000, startedAt: 20_000 }, config);
    expect(stale).toEqual({ state: s, effects: [] });
    const real = robotStep(s, { type: 'face_lost_grace_expired', now: 30_000, startedAt: 22_000 }, config);
    expect(real.state.current).toBe('idle');
  });

  it('talk entered by voice with no face present arms no timer; expiry without a timer is ignored', () => {
    const { state, effects } = robotStep(at('idle'), { type: 'voice_listening_start', now: NOW }, config);
    expect(state.current).toBe('talk');
    expect(effects.some((e) => e.type === 'start_face_lost_timer')).toBe(false);
    expect(robotStep(state, { type: 'face_lost_grace_expired', now: NOW + 9000 }, config).state.current).toBe(
      'talk',
    );
  });
});

describe('the exported table', () => {
  it('its voice_phrase rows are exactly the phrase table (from, target) pairs', () => {
    const machine = ROBOT_TRANSITIONS.filter((r) => r.trigger === 'voice_phrase').flatMap((r) =>
      (r.from as RobotState[]).map((from) => `${from}→${r.phraseTarget}`),
    );
    const phrases = phraseTable('Pip').flatMap((row) =>
      (row.from ?? ROBOT_STATES).map((from) => `${from}→${row.target}`),
    );
    expect(new Set(machine)).toEqual(new Set(phrases));
  });

  it('findTransition returns the row that fires, and none for an ignored edge', () => {
    expect(findTransition(at('dance'), { type: 'choreography_ended', now: NOW })?.to).toBe('idle');
    expect(findTransition(at('dance'), { type: 'face_detected', now: NOW })).toBeUndefined();
  });

  it('sleep behaviour: head down, torque released within 3000 ms, camera and mic off', () => {
    expect(STATE_BEHAVIOUR.sleep).toMatchObject({
      head: 'face_down_centred',
      torqueReleaseFallbackMs: 3000,
      cameraEnabled: false,
      micEnabled: false,
      ambientAwareness: false,
    });
    expect(STATE_BEHAVIOUR.security).toMatchObject({ head: 'wide_scan', proactiveGreeting: false });
  });

  it('boots into idle with no face', () => {
    expect(initialRobotState(5)).toEqual({ current: 'idle', since: 5, facePresent: false });
  });
});

// Rules 1-3 over random sequences. The harness plays the runner: it keeps the one pending grace timer
// from the effects and, on a `fire` step, delivers that timer's expiry (or a stale one).
describe('property: random event sequences', () => {
  const SPEC_MOVES = new Set(
    [...SPEC_EXITS, ...PHRASE_TABLE_EXITS].map((r) => `${r.from}|${r.event.type}|${r.to}`),
  );

  type Step = {
    kind: Exclude<Trigger, 'face_lost_grace_expired'> | 'set_state' | 'fire' | 'fire_stale';
    target: RobotState;
    dt: number;
  };
  const stepArb: fc.Arbitrary<Step> = fc.record({
    kind: fc.constantFrom(
      'face_detected',
      'face_lost',
      'voice_listening_start',
      'voice_standby',
      'voice_phrase',
      'head_pet',
      'choreography_ended',
      'story_silence_expired',
      'set_state',
      'fire',
      'fire_stale',
    ),
    target: fc.constantFrom(...ROBOT_STATES),
    dt: fc.integer({ min: 0, max: 10_000 }),
  });

  it('one current state; one state_changed per change; no implicit returns to idle', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 80 }), (steps) => {
        let state = initialRobotState(0);
        let now = 0;
        let pending: number | undefined;
        for (const s of steps) {
          now += s.dt;
          let event: RobotEvent;
          if (s.kind === 'fire') {
            if (pending === undefined) continue;
            event = { type: 'face_lost_grace_expired', now, startedAt: pending };
            pending = undefined;
          } else if (s.kind === 'fire_stale') {
            event = { type: 'face_lost_grace_expired', now, startedAt: -1 };
          } else if (s.kind === 'voice_phrase' || s.kind === 'set_state') {
            event = { type: s.kind, now, target: s.target };
          } else {
            event = { type: s.kind, now } as RobotEvent;
          }

          const before = state;
          const { state: after, effects } = robotStep(before, event, config);

          // Rule 1: exactly one state is current.
          expect(ROBOT_STATES).toContain(after.current);
          // Rule 3: exactly one state_changed per change of `current`, none otherwise.
          const changed = changes(effects);
          if (after.current !== before.current) {
            expect(changed).toEqual([
              { type: 'state_changed', from: before.current, to: after.current, reason: event.type },
            ]);
            expect(after.since).toBe(now);
            // Rule 1: explicit transitions only; every change is a listed row (or the admin call).
            if (event.type !== 'set_state') {
              expect(SPEC_MOVES.has(`${before.current}|${event.type}|${after.current}`)).toBe(true);
            }
          } else {
            expect(changed).toEqual([]);
            expect(after.since).toBe(before.since);
          }
          // The grace timer only ever runs in talk, and its effects pair up with the runner's view.
          if (after.current !== 'talk') expect(after.graceTimerStartedAt).toBeUndefined();
          for (const effect of effects) {
            if (effect.type === 'start_face_lost_timer') {
              expect(pending).toBeUndefined();
              pending = effect.startedAt;
            }
            if (effect.type === 'cancel_face_lost_timer') {
              expect(pending).toBeDefined();
              pending = undefined;
            }
          }
          expect(after.graceTimerStartedAt).toBe(pending);
          state = after;
        }
      }),
      { numRuns: 500 },
    );
  });
});
