// Rules the bridge applies to agent-path messages (SPEC "Message record", DESIGN §3). Pure.
import { enforceEmojiPrefix, stripEmoji } from '../robot/emotions.js';
import { Segmenter } from '../voice/segmenter.js';

const NINE = '😊 😆 😢 😮 🤔 😠 😐 😍 😴';

export interface ChannelNames {
  robot: string;
  legacy: string;
}

export function isRobotChannel(channel: string, names: ChannelNames): boolean {
  const c = channel.trim().toLowerCase();
  return c === names.robot.toLowerCase() || c === names.legacy.toLowerCase();
}

/**
 * The instruction sandwich for the robot channel: English + emoji rules before and after the user's words
 * (small and large models both honour the last instruction they read), with kid-safe rules in kid mode.
 */
export function sandwich(content: string, kidMode: boolean, context = ''): string {
  const before = [
    '[Voice turn from the desk robot. Answer in English only, in one or two short spoken sentences, no markdown.',
    `Start the reply with exactly one of these emoji: ${NINE}.]`,
  ];
  const after = [`[Reminder: English only; start with one of ${NINE}; keep it short.]`];
  if (kidMode) {
    before.push(
      '[A child is talking: be kind, simple and safe. Never discuss violence, adult topics or anything scary; do not ask for personal details.]',
    );
    after.push('[Kid mode is on: keep it child-safe.]');
  }
  // Context (today's calendar) sits before the user's words, inside the sandwich, as background.
  const background = context.trim() ? `${context.trim()}\n\n` : '';
  return `${before.join(' ')}\n\n${background}${content}\n\n${after.join(' ')}`;
}

/** Splits text into sentences the way MAX_SENTENCES counts them: . ! ? ends, not 3.5, "..." as one. */
export function sentences(text: string): string[] {
  const segmenter = new Segmenter({
    minFirstClauseChars: Number.POSITIVE_INFINITY,
    maxSegmentChars: 100_000,
  });
  return [...segmenter.push(text), ...segmenter.flush()];
}

/** At most `max` sentences, joined back with single spaces. */
export function limitSentences(text: string, max: number): string {
  const parts = sentences(text);
  return parts.length <= max ? text.trim() : parts.slice(0, max).join(' ');
}

/** A reply as the robot channel must receive it: the emoji prefix rule, then the sentence limit. */
export function finishReply(text: string, maxSentences: number): string {
  return limitSentences(enforceEmojiPrefix(text.trim() || '…'), maxSentences);
}

/** True when the text says nothing: no letter or digit once the emoji are gone (a bare "😐 ", "…",
 *  whitespace). An agent turn that produced only this failed, whatever its stop reason says. */
export function isEmptyReply(text: string): boolean {
  return !/[\p{L}\p{N}]/u.test(stripEmoji(text));
}

/** Said when the agent runtime is down, misses its deadline or says nothing: the API always replies. */
export const AGENT_FALLBACK_REPLY =
  '😐 Sorry, my thinking part is not answering right now. Please try again soon.';
