// Emoji → face emotion (SPEC "Emotion catalogue", DESIGN §3). Pure.

/** The firmware's 21 emotion identifiers, keyed by their emoji. */
export const EMOTION_CATALOGUE: Readonly<Record<string, string>> = {
  '😶': 'neutral',
  '🙂': 'happy',
  '😆': 'laughing',
  '😂': 'funny',
  '😔': 'sad',
  '😠': 'angry',
  '😭': 'crying',
  '😍': 'loving',
  '😳': 'embarrassed',
  '😲': 'surprised',
  '😱': 'shocked',
  '🤔': 'thinking',
  '😉': 'winking',
  '😎': 'cool',
  '😌': 'relaxed',
  '🤤': 'delicious',
  '😘': 'kissy',
  '😏': 'confident',
  '😴': 'sleepy',
  '😜': 'silly',
  '🙄': 'confused',
};

/** The nine leading emoji this stack allows, with the emotion each one shows (DESIGN §3). */
export const ALLOWED_LEADING_EMOJI: Readonly<Record<string, string>> = {
  '😊': 'happy',
  '😆': 'laughing',
  '😢': 'sad',
  '😮': 'surprised',
  '🤔': 'thinking',
  '😠': 'angry',
  '😐': 'neutral',
  '😍': 'loving',
  '😴': 'sleepy',
};

export const FALLBACK_EMOJI = '😐';

// One emoji "character": a pictograph with optional skin tone, variation selector and ZWJ sequences,
// or a keycap/flag pair. Good enough for what language models put at the start of a reply.
const EMOJI = String.raw`(?:[0-9#*]\uFE0F?\u20E3|\p{Regional_Indicator}{2}|\p{Extended_Pictographic}(?:\p{Emoji_Modifier}|\uFE0F)?(?:\u200D\p{Extended_Pictographic}(?:\p{Emoji_Modifier}|\uFE0F)?)*)`;
const LEADING = new RegExp(`^\\s*(${EMOJI})\\s*`, 'u');
const ANY = new RegExp(`${EMOJI}|\\uFE0F|\\u200D`, 'gu');

export interface LeadingEmoji {
  /** The leading emoji as written, or null. */
  emoji: string | null;
  /** The face emotion for it, or null when it is unknown. */
  emotion: string | null;
  /** The text after it. */
  rest: string;
}

export function splitLeadingEmoji(text: string): LeadingEmoji {
  const match = LEADING.exec(text);
  if (!match) return { emoji: null, emotion: null, rest: text };
  const emoji = match[1]!;
  const bare = emoji.replace(/\uFE0F/g, '');
  return {
    emoji,
    emotion: ALLOWED_LEADING_EMOJI[bare] ?? EMOTION_CATALOGUE[bare] ?? null,
    rest: text.slice(match[0].length),
  };
}

/** Removes every emoji (speech engines would read them out or choke on them) and tidies spaces. */
export function stripEmoji(text: string): string {
  return text
    .replace(ANY, '')
    .replace(/[ \t]{2,}/g, ' ')
    .trim();
}

/** The bridge rule: a reply must start with one of the nine allowed emoji, else 😐 is put in front. */
export function enforceEmojiPrefix(text: string): string {
  const { emoji } = splitLeadingEmoji(text);
  if (emoji && ALLOWED_LEADING_EMOJI[emoji.replace(/\uFE0F/g, '')]) return text.trimStart();
  return `${FALLBACK_EMOJI} ${text.trimStart()}`;
}
