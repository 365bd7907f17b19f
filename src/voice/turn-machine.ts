// The turn and interruption logic of one device session, as a pure state machine:
// step(state, event) → {state, effects}. The runner (conversation.ts) performs the effects.
//
// Two slots: the utterance being recognised and the reply being produced. Every turn has an id;
// results carry it, and a result whose id is no longer in its slot is stale and dropped — that is how
// an abort during recognition is never lost and a new turn never revives an aborted one.
import type { ListenMode } from '../protocol/index.js';

export interface TurnState {
  mode: ListenMode;
  listening: boolean;
  nextTurnId: number;
  recognizing: number | null;
  replying: number | null;
}

/**
 * chat: the model answers; speak: inject-text (the robot's own words); say: verbatim; asset: play a named sound;
 * greeting: the short fixed answer to a wake word (never a model call).
 */
export type ReplyKind = 'chat' | 'speak' | 'say' | 'asset' | 'greeting';
/** Replies the operator or the bridge starts (inject-text, say, play-asset). */
export type InjectKind = Exclude<ReplyKind, 'chat' | 'greeting'>;

export type TurnEvent =
  | { type: 'listen_start'; mode: ListenMode }
  | { type: 'listen_stop' }
  | { type: 'detect'; text: string; wakeWord: boolean }
  | { type: 'utterance'; audio: unknown }
  | { type: 'recognized'; turnId: number; text: string }
  | { type: 'reply_done'; turnId: number }
  | { type: 'abort'; reason: string }
  | { type: 'inject'; text: string; kind: InjectKind };

export type TurnEffect =
  | { type: 'recognize'; turnId: number; audio: unknown }
  | { type: 'send_stt'; text: string }
  | { type: 'reply'; turnId: number; text: string; kind: ReplyKind }
  | { type: 'cancel'; turnId: number }
  | { type: 'tts_stop'; turnId: number }
  | { type: 'flush_utterance' }
  | { type: 'reset_detector' }
  | { type: 'wake_word'; text: string }
  | { type: 'dropped'; reason: string; text?: string };

export interface TurnConfig {
  /** Recognised text with fewer letters/digits than this is noise (MIN_UTTERANCE_CHARS). */
  minUtteranceChars: number;
  /** Spoken when a `listen detect` carries a wake word; '' = say nothing (only the `stt` echo). */
  wakeGreeting?: string;
}

export function initialTurnState(): TurnState {
  return { mode: 'auto', listening: false, nextTurnId: 1, recognizing: null, replying: null };
}

/** Text worth a turn: at least `min` characters once punctuation and space are trimmed, and at least 2 letters. */
export function isMeaningful(text: string, min: number): boolean {
  const core = text.replace(/[\s\p{P}\p{S}]+/gu, '');
  const letters = (text.match(/\p{L}/gu) ?? []).length;
  return core.length >= min && letters >= 2;
}

type Step = { state: TurnState; effects: TurnEffect[] };

export function step(state: TurnState, event: TurnEvent, config: TurnConfig): Step {
  switch (event.type) {
    case 'listen_start':
      return {
        state: { ...state, mode: event.mode, listening: true },
        effects: [{ type: 'reset_detector' }],
      };

    case 'listen_stop':
      // In manual mode the stop is what ends the utterance; in the VAD modes it only closes the mic.
      return {
        state: { ...state, listening: false },
        effects: state.mode === 'manual' ? [{ type: 'flush_utterance' }] : [],
      };

    case 'detect': {
      if (!event.wakeWord) return startReply(state, event.text, 'chat', config, true);
      // As the reference server does: the wake word is echoed as `stt`, then a short greeting (or nothing).
      const wake: TurnEffect = { type: 'wake_word', text: event.text };
      if (!config.wakeGreeting) {
        return { state, effects: [wake, { type: 'send_stt', text: event.text }] };
      }
      const greeting = startReply(
        state,
        config.wakeGreeting,
        'greeting',
        config,
        false,
        undefined,
        event.text,
      );
      return { state: greeting.state, effects: [wake, ...greeting.effects] };
    }

    case 'utterance': {
      if (state.replying !== null && state.mode !== 'realtime') {
        // Not barge-in mode: audio while we speak is our own echo or noise.
        return { state, effects: [{ type: 'dropped', reason: 'speaking' }] };
      }
      const turnId = state.nextTurnId;
      const effects: TurnEffect[] = [];
      if (state.recognizing !== null) effects.push({ type: 'cancel', turnId: state.recognizing });
      effects.push({ type: 'recognize', turnId, audio: event.audio });
      return { state: { ...state, nextTurnId: turnId + 1, recognizing: turnId }, effects };
    }

    case 'recognized': {
      if (event.turnId !== state.recognizing) {
        return { state, effects: [{ type: 'dropped', reason: 'stale', text: event.text }] };
      }
      const cleared = { ...state, recognizing: null };
      if (!isMeaningful(event.text, config.minUtteranceChars)) {
        return { state: cleared, effects: [{ type: 'dropped', reason: 'too_short', text: event.text }] };
      }
      return startReply(cleared, event.text, 'chat', config, false, event.turnId);
    }

    case 'reply_done':
      if (event.turnId !== state.replying) return { state, effects: [] };
      return { state: { ...state, replying: null }, effects: [] };

    case 'abort': {
      const effects: TurnEffect[] = [];
      if (state.recognizing !== null) effects.push({ type: 'cancel', turnId: state.recognizing });
      if (state.replying !== null) {
        effects.push(
          { type: 'cancel', turnId: state.replying },
          { type: 'tts_stop', turnId: state.replying },
        );
      }
      return { state: { ...state, recognizing: null, replying: null }, effects };
    }

    case 'inject':
      return startReply(state, event.text, event.kind, config, false);
  }
}

/** Starts a reply, interrupting the one in progress (barge-in, typed query, injected speech). */
function startReply(
  state: TurnState,
  text: string,
  kind: ReplyKind,
  config: TurnConfig,
  typed: boolean,
  id?: number,
  /** What the `stt` frame shows, when it is not the reply's own text (a greeting echoes the wake word). */
  sttText?: string,
): Step {
  if (kind === 'chat' && typed && !isMeaningful(text, config.minUtteranceChars)) {
    return { state, effects: [{ type: 'dropped', reason: 'too_short', text }] };
  }
  const turnId = id ?? state.nextTurnId;
  const effects: TurnEffect[] = [];
  if (state.replying !== null) {
    effects.push({ type: 'cancel', turnId: state.replying }, { type: 'tts_stop', turnId: state.replying });
  }
  if (kind === 'chat') effects.push({ type: 'send_stt', text });
  else if (sttText !== undefined) effects.push({ type: 'send_stt', text: sttText });
  effects.push({ type: 'reply', turnId, text, kind });
  return {
    state: { ...state, nextTurnId: Math.max(state.nextTurnId, turnId + 1), replying: turnId },
    effects,
  };
}
