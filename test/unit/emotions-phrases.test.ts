// Emoji rules (SPEC "Emotion catalogue", DESIGN §3) and the voice phrase matcher (SPEC "States and
// transitions"). Both are pure; tables of text in, result out.
import { describe, expect, it } from 'vitest';
import {
  ALLOWED_LEADING_EMOJI,
  EMOTION_CATALOGUE,
  enforceEmojiPrefix,
  FALLBACK_EMOJI,
  splitLeadingEmoji,
  stripEmoji,
} from '../../src/robot/emotions.js';
import { matchPhrase } from '../../src/robot/phrases.js';
import { ROBOT_STATES, type RobotState } from '../../src/robot/states.js';

// Written out from the SPEC table, not read from the module under test.
const SPEC_CATALOGUE: Array<[string, string]> = [
  ['😶', 'neutral'],
  ['🙂', 'happy'],
  ['😆', 'laughing'],
  ['😂', 'funny'],
  ['😔', 'sad'],
  ['😠', 'angry'],
  ['😭', 'crying'],
  ['😍', 'loving'],
  ['😳', 'embarrassed'],
  ['😲', 'surprised'],
  ['😱', 'shocked'],
  ['🤔', 'thinking'],
  ['😉', 'winking'],
  ['😎', 'cool'],
  ['😌', 'relaxed'],
  ['🤤', 'delicious'],
  ['😘', 'kissy'],
  ['😏', 'confident'],
  ['😴', 'sleepy'],
  ['😜', 'silly'],
  ['🙄', 'confused'],
];

// DESIGN §3.
const DESIGN_ALLOWED: Array<[string, string]> = [
  ['😊', 'happy'],
  ['😆', 'laughing'],
  ['😢', 'sad'],
  ['😮', 'surprised'],
  ['🤔', 'thinking'],
  ['😠', 'angry'],
  ['😐', 'neutral'],
  ['😍', 'loving'],
  ['😴', 'sleepy'],
];

const ALLOWED_SET = new Set(DESIGN_ALLOWED.map(([emoji]) => emoji));

describe('emoji tables', () => {
  it('the catalogue has exactly the 21 SPEC emoji and identifiers', () => {
    expect(Object.entries(EMOTION_CATALOGUE).sort()).toEqual([...SPEC_CATALOGUE].sort());
  });

  it('the allowed set is exactly the nine DESIGN §3 emoji with their emotions', () => {
    expect(Object.entries(ALLOWED_LEADING_EMOJI).sort()).toEqual([...DESIGN_ALLOWED].sort());
    expect(FALLBACK_EMOJI).toBe('😐');
  });
});

describe('splitLeadingEmoji', () => {
  it.each(SPEC_CATALOGUE)('catalogue %s → %s', (emoji, emotion) => {
    // Where an emoji is also one of the nine, DESIGN §3 gives the same emotion, so both tables agree.
    expect(splitLeadingEmoji(`${emoji} Hello there.`)).toEqual({ emoji, emotion, rest: 'Hello there.' });
  });

  it.each(DESIGN_ALLOWED)('allowed %s → %s', (emoji, emotion) => {
    expect(splitLeadingEmoji(`${emoji} Sure thing!`)).toEqual({ emoji, emotion, rest: 'Sure thing!' });
  });

  it.each(DESIGN_ALLOWED)('allowed %s with U+FE0F → %s, emoji kept as written', (emoji, emotion) => {
    const written = `${emoji}\uFE0F`;
    expect(splitLeadingEmoji(`${written} Okay.`)).toEqual({ emoji: written, emotion, rest: 'Okay.' });
  });

  it.each([
    ['  😊 Hi', '😊', 'happy', 'Hi'],
    ['\n\t😢 Oh no.', '😢', 'sad', 'Oh no.'],
    ['😊Hi', '😊', 'happy', 'Hi'],
    ['😊', '😊', 'happy', ''],
    ['😊😊 double', '😊', 'happy', '😊 double'],
    ['🤔\uFE0F hmm', '🤔\uFE0F', 'thinking', 'hmm'],
  ])('%j → emoji %s, emotion %s, rest %j', (text, emoji, emotion, rest) => {
    expect(splitLeadingEmoji(text)).toEqual({ emoji, emotion, rest });
  });

  it.each([
    ['👍🏽 Great', '👍🏽'],
    ['👋🏻 Hello', '👋🏻'],
    ['❤️ love', '❤️'],
    ['👨‍👩‍👧 family', '👨‍👩‍👧'],
    ['🇫🇷 France', '🇫🇷'],
  ])('unknown emoji %j (skin tone, ZWJ, flag) is taken whole, emotion null', (text, emoji) => {
    const result = splitLeadingEmoji(text);
    expect(result.emoji).toBe(emoji);
    expect(result.emotion).toBeNull();
    expect(result.rest).toBe(text.slice(emoji.length + 1));
  });

  it.each(['Hello there.', '', '   ', 'Hello 😊 there', 'Good morning! 😴', '1 apple'])(
    'no leading emoji in %j → emoji and emotion null, text unchanged',
    (text) => {
      expect(splitLeadingEmoji(text)).toEqual({ emoji: null, emotion: null, rest: text });
    },
  );
});

describe('stripEmoji', () => {
  it.each([
    ['😊 Hello there.', 'Hello there.'],
    ['Hello 😊 there', 'Hello there'],
    ['Hi 👨‍👩‍👧 family', 'Hi family'],
    ['Bonjour 🇫🇷 friend', 'Bonjour friend'],
    ['Nice 👍🏽 work', 'Nice work'],
    ['I ❤️ you', 'I you'],
    ['Stars ⭐⭐⭐!', 'Stars !'],
    ['🤔\uFE0F hmm', 'hmm'],
    ['😊😢😮🤔😠😐😍😴😆', ''],
    ['No emoji here.', 'No emoji here.'],
    ['line one\nline two 😊', 'line one\nline two'],
  ])('%j → %j', (input, expected) => {
    expect(stripEmoji(input)).toBe(expected);
  });

  it.each(SPEC_CATALOGUE)('removes catalogue emoji %s anywhere', (emoji) => {
    expect(stripEmoji(`${emoji}a ${emoji} b${emoji}`)).toBe('a b');
  });

  it('leaves no emoji parts behind (variation selectors, joiners, keycap marks)', () => {
    const out = stripEmoji('Press 1️⃣ then #️⃣, hug 🧑‍🤝‍🧑 and 🏳️‍🌈 done');
    expect(out).not.toMatch(/\uFE0F|\u200D|\u20E3|\p{Extended_Pictographic}|\p{Regional_Indicator}/u);
  });
});

describe('enforceEmojiPrefix', () => {
  it.each(DESIGN_ALLOWED)('allowed %s is kept as is', (emoji) => {
    expect(enforceEmojiPrefix(`${emoji} Hello.`)).toBe(`${emoji} Hello.`);
  });

  it.each([
    ['  😊 Hello.', '😊 Hello.'],
    ['😊\uFE0F Hello.', '😊\uFE0F Hello.'],
  ])('%j → %j (allowed, leading space trimmed)', (input, expected) => {
    expect(enforceEmojiPrefix(input)).toBe(expected);
  });

  const notAllowed = SPEC_CATALOGUE.map(([emoji]) => emoji).filter((emoji) => !ALLOWED_SET.has(emoji));

  it('16 catalogue emoji are outside the nine (5 are shared)', () => {
    expect(notAllowed).toHaveLength(16);
  });

  it.each(notAllowed)('catalogue-but-not-allowed %s gets 😐 in front', (emoji) => {
    expect(enforceEmojiPrefix(`${emoji} Hello.`)).toBe(`😐 ${emoji} Hello.`);
  });

  it.each([
    ['Hello.', '😐 Hello.'],
    ['  Hello.', '😐 Hello.'],
    ['👍🏽 ok', '😐 👍🏽 ok'],
    ['Hello 😊', '😐 Hello 😊'],
  ])('%j → %j', (input, expected) => {
    expect(enforceEmojiPrefix(input)).toBe(expected);
  });

  it('is idempotent', () => {
    for (const text of ['Hello.', '🙂 Hi', '😊 Yes', '  👍 ok']) {
      const once = enforceEmojiPrefix(text);
      expect(enforceEmojiPrefix(once)).toBe(once);
    }
  });
});

describe('matchPhrase (robot name Pip)', () => {
  const NAME = 'Pip';
  const CHAT_STATES: RobotState[] = ['idle', 'talk'];
  const WAKEABLE: RobotState[] = ['sleep', 'security', 'story_time'];
  const others = (allowed: RobotState[]) => ROBOT_STATES.filter((s) => !allowed.includes(s));

  // Every phrase of the SPEC phrase table, with the states it applies in.
  const PHRASES: Array<{ phrase: string; target: RobotState; from: RobotState[] }> = [
    { phrase: 'goodnight pip', target: 'sleep', from: CHAT_STATES },
    { phrase: 'good night pip', target: 'sleep', from: CHAT_STATES },
    { phrase: 'go to sleep', target: 'sleep', from: CHAT_STATES },
    { phrase: 'keep watch', target: 'security', from: CHAT_STATES },
    { phrase: 'security mode', target: 'security', from: CHAT_STATES },
    { phrase: 'watch the room', target: 'security', from: CHAT_STATES },
    { phrase: 'tell me a story', target: 'story_time', from: CHAT_STATES },
    { phrase: 'story time', target: 'story_time', from: CHAT_STATES },
    { phrase: 'wake up', target: 'idle', from: WAKEABLE },
    { phrase: 'come back', target: 'idle', from: WAKEABLE },
    { phrase: 'are you there', target: 'idle', from: WAKEABLE },
    { phrase: 'dance', target: 'dance', from: CHAT_STATES },
  ];

  const matching = PHRASES.flatMap(({ phrase, target, from }) =>
    from.map((state) => ({ phrase, target, state })),
  );
  const notMatching = PHRASES.flatMap(({ phrase, from }) => others(from).map((state) => ({ phrase, state })));

  it.each(matching)('"$phrase" in $state → $target', ({ phrase, target, state }) => {
    expect(matchPhrase(phrase, state, NAME)).toMatchObject({ target, phrase });
  });

  it.each(notMatching)('"$phrase" in $state → no match', ({ phrase, state }) => {
    expect(matchPhrase(phrase, state, NAME)).toBeNull();
  });

  it.each([
    ['Good night, Pip!', 'sleep'],
    ['GOODNIGHT PIP', 'sleep'],
    ['okay, goodnight, pip.', 'sleep'],
    ['Can you Go To Sleep now?', 'sleep'],
    ['Please keep watch while I am out.', 'security'],
    ['Security-mode, please', 'security'],
    ['Tell me a story!', 'story_time'],
    ["Let's dance!", 'dance'],
  ] as Array<[string, RobotState]>)('%j in talk → %s (case and punctuation ignored)', (text, target) => {
    expect(matchPhrase(text, 'talk', NAME)?.target).toBe(target);
  });

  it.each([
    ['Wake up, Pip!', 'sleep'],
    ['Are you there?', 'security'],
    ['COME BACK', 'story_time'],
  ] as Array<[string, RobotState]>)('%j in %s → idle', (text, state) => {
    expect(matchPhrase(text, state, NAME)).toMatchObject({ target: 'idle' });
  });

  it('uses the configured robot name, not a fixed one', () => {
    expect(matchPhrase('Good night, Robo!', 'idle', 'Robo')?.target).toBe('sleep');
    expect(matchPhrase('Good night, Pip!', 'idle', 'Robo')).toBeNull();
    expect(matchPhrase('Good night, Robo!', 'idle', 'Pip')).toBeNull();
  });

  it.each([
    'good night',
    'goodnight everyone',
    'what is the weather like today',
    'I had a good night, thanks',
    'watch the movie',
    'tell me a joke',
    '',
  ])('unrelated %j → null', (text) => {
    for (const state of ROBOT_STATES) expect(matchPhrase(text, state, NAME)).toBeNull();
  });

  describe('song names', () => {
    const songs = ['Happy Birthday', 'Yo', 'La Bamba!'];

    it.each(CHAT_STATES)('a song name in %s → dance with that song', (state) => {
      expect(matchPhrase('Please play happy birthday for me', state, NAME, songs)).toEqual({
        target: 'dance',
        phrase: 'happy birthday',
        song: 'Happy Birthday',
      });
      expect(matchPhrase('la bamba', state, NAME, songs)).toMatchObject({
        target: 'dance',
        song: 'La Bamba!',
      });
    });

    it.each(others(CHAT_STATES))('a song name in %s → no match', (state) => {
      expect(matchPhrase('Please play happy birthday', state, NAME, songs)).toBeNull();
    });

    it('names shorter than 3 characters never match', () => {
      expect(matchPhrase('yo yo yo', 'idle', NAME, songs)).toBeNull();
    });

    it('no song list → no song match', () => {
      expect(matchPhrase('play happy birthday', 'idle', NAME)).toBeNull();
    });
  });

  describe('story_time exit phrases (SPEC exit rules: "the end" or "stop story" → idle)', () => {
    it.each(['The end.', 'Stop story'])('%j in story_time → idle', (text) => {
      expect(matchPhrase(text, 'story_time', NAME)).toMatchObject({ target: 'idle' });
    });
  });
});
