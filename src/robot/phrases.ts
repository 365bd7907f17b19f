// Voice phrases that change the robot state (SPEC "States and transitions"). Pure: text in, target out.
// Case-insensitive substring matches, checked before the model sees the text.
import type { RobotState } from './states.js';

export interface PhraseMatch {
  target: RobotState;
  phrase: string;
  /** Set for the dance target when a song name matched. */
  song?: string;
}

/** States in which the wake phrases apply. */
const WAKEABLE: readonly RobotState[] = ['sleep', 'security', 'story_time'];

export function phraseTable(
  robotName: string,
): Array<{ phrases: string[]; target: RobotState; from?: readonly RobotState[] }> {
  const name = robotName.toLowerCase();
  return [
    {
      phrases: [`goodnight ${name}`, `good night ${name}`, 'go to sleep'],
      target: 'sleep',
      from: ['idle', 'talk'],
    },
    {
      phrases: ['keep watch', 'security mode', 'watch the room'],
      target: 'security',
      from: ['idle', 'talk'],
    },
    { phrases: ['tell me a story', 'story time'], target: 'story_time', from: ['idle', 'talk'] },
    { phrases: ['wake up', 'come back', 'are you there'], target: 'idle', from: WAKEABLE },
    {
      phrases: ['the end', 'stop story', 'stop the story', 'end the story'],
      target: 'idle',
      from: ['story_time'],
    },
    { phrases: ['dance'], target: 'dance', from: ['idle', 'talk'] },
  ];
}

export function matchPhrase(
  text: string,
  current: RobotState,
  robotName: string,
  songs: readonly string[] = [],
): PhraseMatch | null {
  const lower = normalise(text);
  for (const row of phraseTable(robotName)) {
    if (row.from && !row.from.includes(current)) continue;
    const phrase = row.phrases.find((p) => lower.includes(p));
    if (phrase) return { target: row.target, phrase };
  }
  if (current === 'idle' || current === 'talk') {
    for (const song of songs) {
      const name = normalise(song);
      if (name.length >= 3 && lower.includes(name)) return { target: 'dance', phrase: name, song };
    }
  }
  return null;
}

/** Lowercase, punctuation to spaces, single spaces: "Good night, Pip!" → "good night pip". */
function normalise(text: string): string {
  return ` ${text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}']+/gu, ' ')
    .trim()} `.replace(/^ | $/g, '');
}

/** Acknowledgements spoken when a voice phrase changes the state. */
export const STATE_ACKNOWLEDGEMENTS: Record<RobotState, string> = {
  sleep: '😴 Good night.',
  security: '😐 Keeping watch.',
  story_time: '😊 Story time! What should the story be about?',
  idle: '😊 I am here.',
  dance: '😆 Let us dance!',
  talk: '😊 Yes?',
};
