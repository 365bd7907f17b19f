// The robot state machine (SPEC "States and transitions", DESIGN §3 and §5), pure and table-driven:
// robotStep(state, event, config) → {state, effects}. The runner (the firmware emulator) performs the
// effects: it repaints, moves the head, arms and cancels timers, and turns each `state_changed` effect
// into the `state_changed` perception event {from, to, reason}.
//
// Rules (SPEC):
//  1. Exactly one state is current; every transition is a row of ROBOT_TRANSITIONS. Nothing falls back
//     to idle implicitly: an event that matches no row changes no state.
//  2. Camera edges (face_detected, face_lost) move only between idle and talk. story_time, security,
//     sleep and dance ignore them, except the listed exits (security → idle and sleep → idle on
//     face_detected). The machine still records whether a face is present.
//  3. Every transition yields exactly one `state_changed` effect; its reason is the trigger's name.
//
// Time is a parameter: every event carries `now` (ms, any monotonic origin).
import { isRobotState, type RobotState } from './states.js';

/** DESIGN §3: talk → idle this long after the face is lost (FACE_LOST_GRACE_MS). */
export const DEFAULT_FACE_LOST_GRACE_MS = 8000;
/** SPEC Limits: story_time → idle after this much silence (rule pending; the runner arms the timer). */
export const STORY_SILENCE_MS = 90_000;
/** SPEC Limits: on entering sleep the servo torque is released at the latest after this long. */
export const SLEEP_TORQUE_RELEASE_FALLBACK_MS = 3000;

export interface RobotMachineState {
  current: RobotState;
  /** When `current` was entered (ms). */
  since: number;
  /** Camera view, from the firmware's face_detected / face_lost edges. */
  facePresent: boolean;
  /** When the last face_lost edge arrived; cleared by face_detected. */
  faceLostAt?: number;
  /** Set while the talk → idle face-lost grace timer runs (only ever in talk): when it was started. */
  graceTimerStartedAt?: number;
}

export interface RobotMachineConfig {
  faceLostGraceMs: number;
}

/** How a voice-listening channel was opened (informational; every source moves the same way). */
export type ListeningSource = 'wake_word' | 'inject_text' | 'head_pet_hold';

export type RobotEvent =
  | { type: 'face_detected'; now: number }
  | { type: 'face_lost'; now: number }
  /** `startedAt` is the token of the timer that fired; a stale timer's expiry is ignored. */
  | { type: 'face_lost_grace_expired'; now: number; startedAt?: number }
  | { type: 'voice_listening_start'; now: number; source?: ListeningSource }
  | { type: 'voice_standby'; now: number }
  /** From matchPhrase (src/robot/phrases.ts); `song` when a song name chose the dance. */
  | { type: 'voice_phrase'; now: number; target: RobotState; song?: string }
  | { type: 'head_pet'; now: number }
  | { type: 'choreography_ended'; now: number }
  | { type: 'story_silence_expired'; now: number }
  /** Admin set-state (voice server route, MCP self.robot.set_state). */
  | { type: 'set_state'; now: number; target: RobotState };

export type RobotEventType = RobotEvent['type'];

/** The trigger that caused a transition: the event's name. */
export type TransitionReason = RobotEventType;

export type RobotEffect =
  | { type: 'state_changed'; from: RobotState; to: RobotState; reason: TransitionReason }
  /** Leaving a state: undo its entry behaviour (STATE_BEHAVIOUR), e.g. sleep → torque on, camera and mic on. */
  | { type: 'exit'; state: RobotState }
  /** Entering a state: perform its entry behaviour (STATE_BEHAVIOUR). `song` only for dance by song name. */
  | { type: 'enter'; state: RobotState; song?: string }
  /** Arm the talk → idle timer; when it fires, send face_lost_grace_expired {startedAt}. */
  | { type: 'start_face_lost_timer'; ms: number; startedAt: number }
  | { type: 'cancel_face_lost_timer' };

/** Named guards a row may require (kept as names so the table stays plain data). */
export type TransitionCondition = 'grace_timer_current';

export interface TransitionRule {
  from: readonly RobotState[] | 'any';
  trigger: RobotEventType;
  /** For voice_phrase: the phrase target the row reacts to. */
  phraseTarget?: RobotState;
  when?: TransitionCondition;
  /** 'requested' = the set_state target (never the current state: that is a no-op). */
  to: RobotState | 'requested';
  /** Where the row comes from. */
  source: 'exit table' | 'phrase table';
  note?: string;
}

/**
 * Every transition the robot makes. The voice_phrase rows are exactly the phrase table's `from` lists
 * (src/robot/phrases.ts); two of them go beyond SPEC's exit table, marked `source: 'phrase table'`.
 */
export const ROBOT_TRANSITIONS: readonly TransitionRule[] = [
  {
    from: ['idle'],
    trigger: 'face_detected',
    to: 'talk',
    source: 'exit table',
    note: 'any face, known or not; identity recognition runs in parallel and does not gate the move',
  },
  { from: ['idle'], trigger: 'voice_listening_start', to: 'talk', source: 'exit table' },
  {
    from: ['talk'],
    trigger: 'face_lost_grace_expired',
    when: 'grace_timer_current',
    to: 'idle',
    source: 'exit table',
    note: 'the grace timer starts on face_lost in talk and is cancelled by face_detected',
  },
  { from: ['talk'], trigger: 'voice_standby', to: 'idle', source: 'exit table' },
  {
    from: ['idle', 'talk'],
    trigger: 'voice_phrase',
    phraseTarget: 'sleep',
    to: 'sleep',
    source: 'exit table',
    note: 'head face-down and centred, torque released (3000 ms fallback), sleepy face, camera and mic off, ambient awareness paused',
  },
  { from: ['sleep'], trigger: 'face_detected', to: 'idle', source: 'exit table' },
  { from: ['sleep'], trigger: 'voice_listening_start', to: 'idle', source: 'exit table' },
  { from: ['sleep'], trigger: 'head_pet', to: 'idle', source: 'exit table' },
  {
    from: ['sleep'],
    trigger: 'voice_phrase',
    phraseTarget: 'idle',
    to: 'idle',
    source: 'phrase table',
    note: 'wake phrase (wake up, come back, are you there) while asleep',
  },
  {
    from: ['idle'],
    trigger: 'voice_phrase',
    phraseTarget: 'security',
    to: 'security',
    source: 'exit table',
    note: 'wide scan, serious face, periodic photo and audio capture, no proactive greeting',
  },
  {
    from: ['talk'],
    trigger: 'voice_phrase',
    phraseTarget: 'security',
    to: 'security',
    source: 'phrase table',
    note: 'the exit table lists idle only, but a spoken phrase arrives in talk (listening moved idle → talk)',
  },
  {
    from: ['security'],
    trigger: 'voice_phrase',
    phraseTarget: 'idle',
    to: 'idle',
    source: 'exit table',
    note: 'voice wake phrase',
  },
  { from: ['security'], trigger: 'face_detected', to: 'idle', source: 'exit table' },
  {
    from: ['idle', 'talk'],
    trigger: 'voice_phrase',
    phraseTarget: 'story_time',
    to: 'story_time',
    source: 'exit table',
    note: 'story persona; the bridge calls a cloud model directly with rolling context',
  },
  {
    from: ['story_time'],
    trigger: 'voice_phrase',
    phraseTarget: 'idle',
    to: 'idle',
    source: 'exit table',
    note: 'the end, stop story (and the wake phrases)',
  },
  {
    from: ['story_time'],
    trigger: 'story_silence_expired',
    to: 'idle',
    source: 'exit table',
    note: '90 s of silence (rule pending)',
  },
  {
    from: ['idle', 'talk'],
    trigger: 'voice_phrase',
    phraseTarget: 'dance',
    to: 'dance',
    source: 'exit table',
    note: 'phrase dance or a song name; choreography plus audio',
  },
  { from: ['dance'], trigger: 'choreography_ended', to: 'idle', source: 'exit table' },
  {
    from: 'any',
    trigger: 'set_state',
    to: 'requested',
    source: 'exit table',
    note: 'state is one of the six; setting the current state is a no-op',
  },
];

/** What entering each state does; `exit` undoes it. The firmware emulator reads this. */
export interface StateBehaviour {
  cameraEnabled: boolean;
  micEnabled: boolean;
  ambientAwareness: boolean;
  proactiveGreeting: boolean;
  head?: 'face_down_centred' | 'wide_scan';
  /** Servo torque is released on entry, at the latest after this long. */
  torqueReleaseFallbackMs?: number;
  /** Face shown on entry (an emotion identifier, or 'serious' for security). */
  face?: string;
  periodicCapture?: boolean;
  persona?: 'story';
  choreography?: boolean;
}

const AWAKE = { cameraEnabled: true, micEnabled: true, ambientAwareness: true, proactiveGreeting: true };

export const STATE_BEHAVIOUR: Readonly<Record<RobotState, StateBehaviour>> = {
  idle: AWAKE,
  talk: AWAKE,
  story_time: { ...AWAKE, persona: 'story' },
  security: { ...AWAKE, proactiveGreeting: false, head: 'wide_scan', face: 'serious', periodicCapture: true },
  sleep: {
    cameraEnabled: false,
    micEnabled: false,
    ambientAwareness: false,
    proactiveGreeting: false,
    head: 'face_down_centred',
    torqueReleaseFallbackMs: SLEEP_TORQUE_RELEASE_FALLBACK_MS,
    face: 'sleepy',
  },
  dance: { ...AWAKE, choreography: true },
};

export function initialRobotState(now: number): RobotMachineState {
  return { current: 'idle', since: now, facePresent: false };
}

export interface RobotStep {
  state: RobotMachineState;
  effects: RobotEffect[];
}

const CONDITIONS: Record<TransitionCondition, (state: RobotMachineState, event: RobotEvent) => boolean> = {
  // The grace timer is running and the expiry is this timer's, not a cancelled one's.
  grace_timer_current: (state, event) =>
    state.graceTimerStartedAt !== undefined &&
    (event.type !== 'face_lost_grace_expired' ||
      event.startedAt === undefined ||
      event.startedAt === state.graceTimerStartedAt),
};

/** The row of ROBOT_TRANSITIONS that `event` fires in `state`, if any. */
export function findTransition(state: RobotMachineState, event: RobotEvent): TransitionRule | undefined {
  return ROBOT_TRANSITIONS.find(
    (rule) =>
      rule.trigger === event.type &&
      (rule.from === 'any' || rule.from.includes(state.current)) &&
      (rule.phraseTarget === undefined ||
        (event.type === 'voice_phrase' && event.target === rule.phraseTarget)) &&
      (rule.when === undefined || CONDITIONS[rule.when](state, event)),
  );
}

export function robotStep(
  state: RobotMachineState,
  event: RobotEvent,
  config: RobotMachineConfig,
): RobotStep {
  // Camera edges first update what the machine knows about the face, in every state.
  const { state: seen, effects } = observeCamera(state, event, config);

  const rule = findTransition(seen, event);
  if (!rule) return { state: seen, effects };

  const to = rule.to === 'requested' ? (event as { target?: unknown }).target : rule.to;
  if (!isRobotState(to) || to === seen.current) return { state: seen, effects };
  return transition(seen, to, event, effects);
}

/** face_detected / face_lost bookkeeping and the talk face-lost grace timer; never a transition. */
function observeCamera(state: RobotMachineState, event: RobotEvent, config: RobotMachineConfig): RobotStep {
  if (event.type === 'face_detected') {
    const { faceLostAt: _lost, graceTimerStartedAt, ...rest } = state;
    const next: RobotMachineState = { ...rest, facePresent: true };
    return {
      state: next,
      effects: graceTimerStartedAt !== undefined ? [{ type: 'cancel_face_lost_timer' }] : [],
    };
  }
  if (event.type === 'face_lost') {
    const next: RobotMachineState = { ...state, facePresent: false, faceLostAt: event.now };
    if (state.current !== 'talk' || state.graceTimerStartedAt !== undefined) {
      return { state: next, effects: [] };
    }
    return {
      state: { ...next, graceTimerStartedAt: event.now },
      effects: [{ type: 'start_face_lost_timer', ms: config.faceLostGraceMs, startedAt: event.now }],
    };
  }
  return { state, effects: [] };
}

function transition(
  state: RobotMachineState,
  to: RobotState,
  event: RobotEvent,
  effects: RobotEffect[],
): RobotStep {
  const from = state.current;
  const { graceTimerStartedAt, ...rest } = state;
  const out = [...effects];
  // Leaving talk disarms the grace timer (unless it is the timer that just fired).
  if (graceTimerStartedAt !== undefined && event.type !== 'face_lost_grace_expired') {
    out.push({ type: 'cancel_face_lost_timer' });
  }
  out.push({ type: 'exit', state: from });
  out.push({ type: 'state_changed', from, to, reason: event.type });
  out.push(
    event.type === 'voice_phrase' && to === 'dance' && event.song !== undefined
      ? { type: 'enter', state: to, song: event.song }
      : { type: 'enter', state: to },
  );
  return { state: { ...rest, current: to, since: event.now }, effects: out };
}
