// Prompt rules of the voice providers: the per-turn suffix (emoji + English, kid-mode aware), the persona
// as the one system message, and merging system messages when there is no persona. Pure.

import { ALLOWED_LEADING_EMOJI } from '../../robot/emotions.js';
import type { ChatMessage } from '../openai-client.js';

const EMOJI_LIST = Object.keys(ALLOWED_LEADING_EMOJI).join(' ');

/** Appended to the last user message of every turn. */
export function turnSuffix(kidMode: boolean): string {
  const rules = [
    `Start your reply with exactly one of these emoji: ${EMOJI_LIST}.`,
    'Reply in English only, in one or two short spoken sentences, with no markdown.',
  ];
  if (kidMode) {
    rules.push(
      'You are talking with a child: be kind, simple and safe; never scary, rude or grown-up topics.',
    );
  }
  return `\n\n(${rules.join(' ')})`;
}

/**
 * The messages for the model: one system message (the persona if there is one, else every system message
 * of the dialogue merged, because small models' templates honour only one), then the dialogue with the
 * suffix on its last user message.
 */
export function buildMessages(input: {
  history: ChatMessage[];
  persona: string | undefined;
  systemPrompt: string;
  kidMode: boolean;
}): ChatMessage[] {
  const systems = [
    input.systemPrompt,
    ...input.history.filter((m) => m.role === 'system').map((m) => m.content ?? ''),
  ]
    .map((text) => text.trim())
    .filter(Boolean);
  const system = input.persona?.trim() ? input.persona.trim() : systems.join('\n\n');
  const dialogue = input.history.filter((m) => m.role !== 'system').map((m) => ({ ...m }));
  for (let i = dialogue.length - 1; i >= 0; i--) {
    const message = dialogue[i]!;
    if (message.role === 'user') {
      message.content = `${message.content ?? ''}${turnSuffix(input.kidMode)}`;
      break;
    }
  }
  return system ? [{ role: 'system', content: system }, ...dialogue] : dialogue;
}
