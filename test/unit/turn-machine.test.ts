// The turn and interruption state machine (DESIGN §5): pure step(state, event) → {state, effects}.
// Tables for each event in each slot situation, then a fast-check run over long random event sequences
// for the invariants that make aborts final and turn ids monotonic.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ListenMode } from '../../src/protocol/index.js';
import {
  type InjectKind,
  initialTurnState,
  isMeaningful,
  step,
  type TurnConfig,
  type TurnEffect,
  type TurnEvent,
  type TurnState,
} from '../../src/voice/turn-machine.js';

const config: TurnConfig = { minUtteranceChars: 2 };
const MODES: ListenMode[] = ['auto', 'manual', 'realtime', 'vad'];

function state(overrides: Partial<TurnState> = {}): TurnState {
  return { ...initialTurnState(), ...overrides };
}

const types = (effects: TurnEffect[]) => effects.map((e) => e.type);

describe('initial state', () => {
  it('is auto, not listening, no turns, ids start at 1', () => {
    expect(initialTurnState()).toEqual({
      mode: 'auto',
      listening: false,
      nextTurnId: 1,
      recognizing: null,
      replying: null,
    });
  });
});

describe('listen_start / listen_stop', () => {
  it.each(MODES)('listen_start %s sets mode and listening and resets the detector', (mode) => {
    const before = state({ mode: mode === 'auto' ? 'manual' : 'auto', nextTurnId: 7, replying: 6 });
    const { state: after, effects } = step(before, { type: 'listen_start', mode }, config);
    expect(after).toEqual({ ...before, mode, listening: true });
    expect(effects).toEqual([{ type: 'reset_detector' }]);
  });

  it.each([
    ['manual', [{ type: 'flush_utterance' }]],
    ['auto', []],
    ['realtime', []],
    ['vad', []],
  ] as Array<[ListenMode, TurnEffect[]]>)('listen_stop in %s mode → effects %j', (mode, expected) => {
    const before = state({ mode, listening: true, nextTurnId: 3, recognizing: 2 });
    const { state: after, effects } = step(before, { type: 'listen_stop' }, config);
    expect(after).toEqual({ ...before, listening: false });
    expect(effects).toEqual(expected);
  });
});

describe('detect', () => {
  it.each([
    { text: 'hi pip', before: state() },
    { text: 'hey there', before: state({ replying: 4, nextTurnId: 5 }) },
  ])('wake word "$text" with no greeting → wake_word + stt echo, state unchanged', ({ text, before }) => {
    const { state: after, effects } = step(before, { type: 'detect', text, wakeWord: true }, config);
    expect(after).toBe(before);
    expect(effects).toEqual([
      { type: 'wake_word', text },
      { type: 'send_stt', text },
    ]);
  });

  const greeting = { ...config, wakeGreeting: "😊 Hi, I'm listening." };
  it('wake word with a greeting → wake_word, stt echo of the wake word, greeting reply (never chat)', () => {
    const before = state({ nextTurnId: 4 });
    const { state: after, effects } = step(
      before,
      { type: 'detect', text: '你好小智', wakeWord: true },
      greeting,
    );
    expect(effects).toEqual([
      { type: 'wake_word', text: '你好小智' },
      { type: 'send_stt', text: '你好小智' },
      { type: 'reply', turnId: 4, text: "😊 Hi, I'm listening.", kind: 'greeting' },
    ]);
    expect(after).toEqual({ ...before, replying: 4, nextTurnId: 5 });
  });

  it('wake word during a reply → the reply is interrupted before the greeting', () => {
    const before = state({ nextTurnId: 6, replying: 5 });
    const { effects } = step(before, { type: 'detect', text: 'hey pip', wakeWord: true }, greeting);
    expect(types(effects)).toEqual(['wake_word', 'cancel', 'tts_stop', 'send_stt', 'reply']);
    expect(effects.some((e) => e.type === 'reply' && e.kind === 'chat')).toBe(false);
  });

  it('typed text → send_stt + reply(chat) with a new id, replying set', () => {
    const before = state({ nextTurnId: 4 });
    const { state: after, effects } = step(
      before,
      { type: 'detect', text: 'what time is it', wakeWord: false },
      config,
    );
    expect(effects).toEqual([
      { type: 'send_stt', text: 'what time is it' },
      { type: 'reply', turnId: 4, text: 'what time is it', kind: 'chat' },
    ]);
    expect(after).toEqual({ ...before, replying: 4, nextTurnId: 5 });
  });

  it('typed text while replying interrupts the reply first', () => {
    const before = state({ nextTurnId: 4, replying: 3 });
    const { state: after, effects } = step(
      before,
      { type: 'detect', text: 'stop that', wakeWord: false },
      config,
    );
    expect(effects).toEqual([
      { type: 'cancel', turnId: 3 },
      { type: 'tts_stop', turnId: 3 },
      { type: 'send_stt', text: 'stop that' },
      { type: 'reply', turnId: 4, text: 'stop that', kind: 'chat' },
    ]);
    expect(after.replying).toBe(4);
  });

  it.each(['', '.', 'a', '?!', '  ', '12'])('noise text %j → dropped too_short, nothing else', (text) => {
    const before = state({ nextTurnId: 9, replying: 8 });
    const { state: after, effects } = step(before, { type: 'detect', text, wakeWord: false }, config);
    expect(after).toEqual(before);
    expect(effects).toEqual([{ type: 'dropped', reason: 'too_short', text }]);
  });
});

describe('utterance', () => {
  it.each(MODES)('while idle (%s) → recognize with a new turn id', (mode) => {
    const before = state({ mode, nextTurnId: 5 });
    const { state: after, effects } = step(before, { type: 'utterance', audio: 'pcm-a' }, config);
    expect(effects).toEqual([{ type: 'recognize', turnId: 5, audio: 'pcm-a' }]);
    expect(after).toEqual({ ...before, recognizing: 5, nextTurnId: 6 });
  });

  it.each(MODES)('while recognizing (%s) → cancel the old recognition, recognize the new one', (mode) => {
    const before = state({ mode, nextTurnId: 6, recognizing: 5 });
    const { state: after, effects } = step(before, { type: 'utterance', audio: 'pcm-b' }, config);
    expect(effects).toEqual([
      { type: 'cancel', turnId: 5 },
      { type: 'recognize', turnId: 6, audio: 'pcm-b' },
    ]);
    expect(after).toEqual({ ...before, recognizing: 6, nextTurnId: 7 });
  });

  it.each(['auto', 'manual', 'vad'] as ListenMode[])(
    'while replying in %s mode → dropped "speaking", no recognize',
    (mode) => {
      const before = state({ mode, nextTurnId: 3, replying: 2 });
      const { state: after, effects } = step(before, { type: 'utterance', audio: 'echo' }, config);
      expect(after).toEqual(before);
      expect(effects).toEqual([{ type: 'dropped', reason: 'speaking' }]);
    },
  );

  it('while replying in realtime mode → recognize (barge-in possible), the reply is kept', () => {
    const before = state({ mode: 'realtime', nextTurnId: 3, replying: 2 });
    const { state: after, effects } = step(before, { type: 'utterance', audio: 'voice' }, config);
    expect(effects).toEqual([{ type: 'recognize', turnId: 3, audio: 'voice' }]);
    expect(after).toEqual({ ...before, recognizing: 3, nextTurnId: 4 });
  });
});

describe('recognized', () => {
  it('with the current id → send_stt + reply(chat) with that id; recognizing cleared', () => {
    const before = state({ nextTurnId: 8, recognizing: 7 });
    const { state: after, effects } = step(
      before,
      { type: 'recognized', turnId: 7, text: 'tell me a joke' },
      config,
    );
    expect(effects).toEqual([
      { type: 'send_stt', text: 'tell me a joke' },
      { type: 'reply', turnId: 7, text: 'tell me a joke', kind: 'chat' },
    ]);
    expect(after).toEqual({ ...before, recognizing: null, replying: 7, nextTurnId: 8 });
  });

  it('after an abort the late result is stale and is never replied to', () => {
    let s = state({ nextTurnId: 1 });
    s = step(s, { type: 'utterance', audio: 'a' }, config).state; // turn 1
    const aborted = step(s, { type: 'abort', reason: 'wake_word_detected' }, config);
    expect(aborted.effects).toEqual([{ type: 'cancel', turnId: 1 }]);
    const late = step(aborted.state, { type: 'recognized', turnId: 1, text: 'hello robot' }, config);
    expect(late.effects).toEqual([{ type: 'dropped', reason: 'stale', text: 'hello robot' }]);
    expect(late.state).toEqual(aborted.state);
    expect(late.state.replying).toBeNull();
  });

  it('a superseded recognition is stale; the newer one still replies', () => {
    let s = state();
    s = step(s, { type: 'utterance', audio: 'first' }, config).state; // 1
    s = step(s, { type: 'utterance', audio: 'second' }, config).state; // 2, cancels 1
    const old = step(s, { type: 'recognized', turnId: 1, text: 'first words' }, config);
    expect(old.effects).toEqual([{ type: 'dropped', reason: 'stale', text: 'first words' }]);
    expect(old.state).toEqual(s);
    const current = step(old.state, { type: 'recognized', turnId: 2, text: 'second words' }, config);
    expect(types(current.effects)).toEqual(['send_stt', 'reply']);
    expect(current.state.replying).toBe(2);
  });

  it.each([
    [99, 'an id never issued'],
    [0, 'id zero'],
  ])('with %i (%s) while nothing is recognising → stale', (turnId) => {
    const before = state({ nextTurnId: 5 });
    const { state: after, effects } = step(
      before,
      { type: 'recognized', turnId, text: 'hello there' },
      config,
    );
    expect(after).toEqual(before);
    expect(effects).toEqual([{ type: 'dropped', reason: 'stale', text: 'hello there' }]);
  });

  it.each(['', '.', 'a', 'u.', '...', '1'])(
    'too short %j → dropped too_short, recognizing cleared, no reply',
    (text) => {
      const before = state({ nextTurnId: 3, recognizing: 2 });
      const { state: after, effects } = step(before, { type: 'recognized', turnId: 2, text }, config);
      expect(effects).toEqual([{ type: 'dropped', reason: 'too_short', text }]);
      expect(after).toEqual({ ...before, recognizing: null });
    },
  );

  it('too short while replying (realtime) keeps the reply', () => {
    const before = state({ mode: 'realtime', nextTurnId: 4, recognizing: 3, replying: 2 });
    const { state: after, effects } = step(before, { type: 'recognized', turnId: 3, text: 'm' }, config);
    expect(types(effects)).toEqual(['dropped']);
    expect(after.replying).toBe(2);
  });

  it('while replying (barge-in) → cancel + tts_stop the old reply, then send_stt + reply(new)', () => {
    const before = state({ mode: 'realtime', nextTurnId: 4, recognizing: 3, replying: 2 });
    const { state: after, effects } = step(
      before,
      { type: 'recognized', turnId: 3, text: 'no wait, stop' },
      config,
    );
    expect(effects).toEqual([
      { type: 'cancel', turnId: 2 },
      { type: 'tts_stop', turnId: 2 },
      { type: 'send_stt', text: 'no wait, stop' },
      { type: 'reply', turnId: 3, text: 'no wait, stop', kind: 'chat' },
    ]);
    expect(after).toEqual({ ...before, recognizing: null, replying: 3 });
  });
});

describe('abort', () => {
  it.each([
    {
      name: 'while recognizing → cancel the recognition',
      before: state({ nextTurnId: 3, recognizing: 2 }),
      effects: [{ type: 'cancel', turnId: 2 }],
    },
    {
      name: 'while replying → cancel + tts_stop',
      before: state({ nextTurnId: 3, replying: 2 }),
      effects: [
        { type: 'cancel', turnId: 2 },
        { type: 'tts_stop', turnId: 2 },
      ],
    },
    {
      name: 'while both → cancel both, tts_stop the reply',
      before: state({ mode: 'realtime', nextTurnId: 4, recognizing: 3, replying: 2 }),
      effects: [
        { type: 'cancel', turnId: 3 },
        { type: 'cancel', turnId: 2 },
        { type: 'tts_stop', turnId: 2 },
      ],
    },
    { name: 'while idle → no effects', before: state({ nextTurnId: 3 }), effects: [] },
  ] as Array<{ name: string; before: TurnState; effects: TurnEffect[] }>)('$name', ({ before, effects }) => {
    const { state: after, effects: actual } = step(before, { type: 'abort', reason: 'user' }, config);
    expect(actual).toEqual(effects);
    expect(after).toEqual({ ...before, recognizing: null, replying: null });
  });
});

describe('reply_done', () => {
  it('for the current reply clears replying', () => {
    const before = state({ nextTurnId: 3, replying: 2 });
    const { state: after, effects } = step(before, { type: 'reply_done', turnId: 2 }, config);
    expect(effects).toEqual([]);
    expect(after).toEqual({ ...before, replying: null });
  });

  it.each([
    { turnId: 1, before: state({ nextTurnId: 3, replying: 2 }) },
    { turnId: 1, before: state({ nextTurnId: 3 }) },
    { turnId: 2, before: state({ nextTurnId: 4, recognizing: 2, replying: 3 }) },
  ])('for an old id ($turnId) changes nothing', ({ turnId, before }) => {
    const { state: after, effects } = step(before, { type: 'reply_done', turnId }, config);
    expect(effects).toEqual([]);
    expect(after).toEqual(before);
  });
});

describe('inject', () => {
  it.each(['speak', 'say', 'asset'] as InjectKind[])(
    'inject %s → reply of that kind with a new id, no send_stt',
    (kind) => {
      const before = state({ nextTurnId: 6 });
      const { state: after, effects } = step(before, { type: 'inject', text: 'purr', kind }, config);
      expect(effects).toEqual([{ type: 'reply', turnId: 6, text: 'purr', kind }]);
      expect(after).toEqual({ ...before, replying: 6, nextTurnId: 7 });
    },
  );

  it.each(['speak', 'say', 'asset'] as InjectKind[])(
    'inject %s during a reply → cancel + tts_stop the current reply first',
    (kind) => {
      const before = state({ nextTurnId: 6, replying: 5 });
      const { state: after, effects } = step(before, { type: 'inject', text: 'Hello!', kind }, config);
      expect(effects).toEqual([
        { type: 'cancel', turnId: 5 },
        { type: 'tts_stop', turnId: 5 },
        { type: 'reply', turnId: 6, text: 'Hello!', kind },
      ]);
      expect(after.replying).toBe(6);
    },
  );

  it('inject is not filtered for length (a one-letter asset name still plays)', () => {
    const { effects } = step(state(), { type: 'inject', text: 'a', kind: 'asset' }, config);
    expect(types(effects)).toEqual(['reply']);
  });
});

describe('isMeaningful (MIN_UTTERANCE_CHARS = 2)', () => {
  it.each([
    ['', false],
    ['.', false],
    ['a', false],
    ['ok', true],
    ['hi!', true],
    ['  ..  ', false],
    ['12', false],
    ['go to sleep', true],
    ['a1', false],
    ['?!?!', false],
    ['😊', false],
    ['Ünï', true],
  ])('%j → %s', (text, expected) => {
    expect(isMeaningful(text, 2)).toBe(expected);
  });

  it.each([
    ['hi', 3, false],
    ['hey', 3, true],
    ['h i', 3, false],
    ['ab', 1, true],
  ])('%j with min %i → %s', (text, min, expected) => {
    expect(isMeaningful(text, min)).toBe(expected);
  });
});

describe('random event sequences (fast-check)', () => {
  // Ids in recognized/reply_done events are drawn relative to the current state so that the interesting
  // cases (current, stale, previous, never issued) all come up often.
  type IdPick = 'recognizing' | 'replying' | 'previous' | 'future' | number;
  type EventSpec =
    | { type: 'listen_start'; mode: ListenMode }
    | { type: 'listen_stop' }
    | { type: 'detect'; text: string; wakeWord: boolean }
    | { type: 'utterance' }
    | { type: 'recognized'; id: IdPick; text: string }
    | { type: 'reply_done'; id: IdPick }
    | { type: 'abort' }
    | { type: 'inject'; kind: InjectKind };

  const idPick = fc.oneof(
    fc.constantFrom<IdPick>('recognizing', 'recognizing', 'replying', 'previous', 'future'),
    fc.integer({ min: 0, max: 40 }),
  );
  const text = fc.constantFrom('', '.', 'a', 'ok', 'what is the weather', 'go to sleep', '12');
  const eventSpec: fc.Arbitrary<EventSpec> = fc.oneof(
    fc.record({ type: fc.constant('listen_start' as const), mode: fc.constantFrom(...MODES) }),
    fc.record({ type: fc.constant('listen_stop' as const) }),
    fc.record({ type: fc.constant('detect' as const), text, wakeWord: fc.boolean() }),
    fc.record({ type: fc.constant('utterance' as const) }),
    fc.record({ type: fc.constant('utterance' as const) }),
    fc.record({ type: fc.constant('recognized' as const), id: idPick, text }),
    fc.record({ type: fc.constant('recognized' as const), id: idPick, text }),
    fc.record({ type: fc.constant('reply_done' as const), id: idPick }),
    fc.record({ type: fc.constant('abort' as const) }),
    fc.record({ type: fc.constant('inject' as const), kind: fc.constantFrom('speak', 'say', 'asset') }),
  ) as fc.Arbitrary<EventSpec>;

  function resolveId(pick: IdPick, s: TurnState): number {
    if (typeof pick === 'number') return pick;
    if (pick === 'recognizing') return s.recognizing ?? s.nextTurnId - 1;
    if (pick === 'replying') return s.replying ?? s.nextTurnId - 1;
    if (pick === 'previous') return Math.max(0, s.nextTurnId - 2);
    return s.nextTurnId;
  }

  function toEvent(spec: EventSpec, s: TurnState): TurnEvent {
    switch (spec.type) {
      case 'recognized':
        return { type: 'recognized', turnId: resolveId(spec.id, s), text: spec.text };
      case 'reply_done':
        return { type: 'reply_done', turnId: resolveId(spec.id, s) };
      case 'utterance':
        return { type: 'utterance', audio: null };
      case 'abort':
        return { type: 'abort', reason: 'test' };
      case 'inject':
        return { type: 'inject', text: 'injected words', kind: spec.kind };
      default:
        return spec;
    }
  }

  it('keeps turn ids monotonic and never revives a cancelled turn', () => {
    fc.assert(
      fc.property(fc.array(eventSpec, { minLength: 1, maxLength: 200 }), fc.boolean(), (specs, greets) => {
        const stepConfig: TurnConfig = greets ? { ...config, wakeGreeting: 'Hi!' } : config;
        let s = initialTurnState();
        const cancelled = new Set<number>();
        const issued: number[] = []; // ids of new turns, in the order they appear
        for (const spec of specs) {
          const event = toEvent(spec, s);
          const { state: next, effects } = step(s, event, stepConfig);

          // nextTurnId never decreases; slots hold only issued ids.
          expect(next.nextTurnId).toBeGreaterThanOrEqual(s.nextTurnId);
          for (const slot of [next.recognizing, next.replying]) {
            if (slot !== null) expect(slot).toBeLessThan(next.nextTurnId);
          }

          const replies = effects.filter((e) => e.type === 'reply');
          expect(replies.length).toBeLessThanOrEqual(1);
          for (const effect of effects) {
            if (effect.type === 'reply') {
              expect(effect.turnId).toBe(next.replying);
              expect(cancelled.has(effect.turnId)).toBe(false);
            }
            // A cancelled id was in a slot before this step.
            if (effect.type === 'cancel') expect([s.recognizing, s.replying]).toContain(effect.turnId);
            if (effect.type === 'tts_stop') expect(effect.turnId).toBe(s.replying);
          }
          for (const effect of effects) if (effect.type === 'cancel') cancelled.add(effect.turnId);

          // New turns get strictly increasing ids, never an id issued before.
          const fresh = effects
            .filter((e): e is Extract<TurnEffect, { turnId: number }> => 'turnId' in e)
            .filter((e) => e.type === 'recognize' || (e.type === 'reply' && e.turnId !== s.recognizing))
            .map((e) => e.turnId);
          for (const id of fresh) {
            if (issued.length > 0) expect(id).toBeGreaterThan(issued[issued.length - 1]!);
            expect(id).toBeGreaterThanOrEqual(s.nextTurnId);
            issued.push(id);
          }

          // A chat reply is always announced with send_stt in the same step, and so is a wake word (its echo);
          // other kinds never. A wake word never starts a chat reply.
          const reply = replies[0];
          const stt = effects.some((e) => e.type === 'send_stt');
          const woke = effects.some((e) => e.type === 'wake_word');
          const chat = reply !== undefined && reply.type === 'reply' && reply.kind === 'chat';
          expect(stt).toBe(chat || woke);
          if (woke) expect(chat).toBe(false);

          s = next;
        }
      }),
      { numRuns: 400 },
    );
  });
});
