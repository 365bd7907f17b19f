// The pure parts of the pocketsphinx provider: choosing between the grammar's command and the general
// model's free text (decideCommand), the phone similarity behind it, and the JSGF grammar text.
// phonesOf comes from a tiny hand-written dictionary (CMUdict-style phones), not from the native library.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  COMMAND_SIMILARITY,
  commandGrammar,
  decideCommand,
  phoneSimilarity,
} from '../../src/providers/asr/pocketsphinx.js';

const DICTIONARY: Record<string, string> = {
  a: 'AH',
  are: 'AA R',
  back: 'B AE K',
  banana: 'B AH N AE N AH',
  bread: 'B R EH D',
  come: 'K AH M',
  dance: 'D AE N S',
  dense: 'D EH N S',
  go: 'G OW',
  is: 'IH Z',
  keep: 'K IY P',
  like: 'L AY K',
  me: 'M IY',
  mode: 'M OW D',
  room: 'R UW M',
  security: 'S IH K Y UH R IH T IY',
  sleep: 'S L IY P',
  slip: 'S L IH P',
  story: 'S T AO R IY',
  tell: 'T EH L',
  the: 'DH AH',
  there: 'DH EH R',
  to: 'T UW',
  today: 'T AH D EY',
  up: 'AH P',
  wake: 'W EY K',
  watch: 'W AA CH',
  weather: 'W EH DH ER',
  what: 'W AH T',
  you: 'Y UW',
};

/** Like the provider's: the phones of every known word, unknown words contribute nothing. */
const phonesOf = (text: string): string[] =>
  text
    .split(/\s+/)
    .filter(Boolean)
    .flatMap((word) => DICTIONARY[word]?.split(' ') ?? []);

describe('decideCommand', () => {
  it.each([
    { name: 'empty command → free text', command: '', free: 'go to sleep', expected: null },
    { name: 'empty command and empty free text', command: '', free: '', expected: null },
    {
      name: 'general model heard nothing → command',
      command: 'go to sleep',
      free: '',
      expected: 'go to sleep',
    },
    {
      name: 'shared content word → command',
      command: 'watch the room',
      free: 'watch the weather',
      expected: 'watch the room',
    },
    {
      name: 'shared content word, phones unknown',
      command: 'keep watch',
      free: 'zzz watch',
      expected: 'keep watch',
    },
    { name: 'identical texts → command', command: 'dance', free: 'dance', expected: 'dance' },
    {
      name: 'only stopwords shared, phones similar (0.875) → command',
      command: 'go to sleep',
      free: 'go to slip',
      expected: 'go to sleep',
    },
    {
      name: 'only stopwords shared, phones dissimilar (0.167) → null',
      command: 'watch the room',
      free: 'what is the weather like today',
      expected: null,
    },
    {
      name: 'only stopwords shared ("a"), dissimilar → null',
      command: 'tell me a story',
      free: 'a banana bread',
      expected: null,
    },
    {
      name: 'no shared word, similar phones (0.75) → command',
      command: 'dance',
      free: 'dense',
      expected: 'dance',
    },
    {
      name: 'no shared word, dissimilar phones → null',
      command: 'security mode',
      free: 'are you there',
      expected: null,
    },
    { name: 'nothing in common at all → null', command: 'come back', free: 'banana bread', expected: null },
  ])('$name', ({ command, free, expected }) => {
    expect(decideCommand(command, free, phonesOf)).toBe(expected);
  });

  it('the similarity figures quoted above are what the rule compares', () => {
    expect(phoneSimilarity(phonesOf('go to slip'), phonesOf('go to sleep'))).toBeCloseTo(7 / 8);
    expect(phoneSimilarity(phonesOf('dense'), phonesOf('dance'))).toBeCloseTo(3 / 4);
    expect(
      phoneSimilarity(phonesOf('what is the weather like today'), phonesOf('watch the room')),
    ).toBeLessThan(COMMAND_SIMILARITY);
  });

  it('shared stopwords alone never decide: the same stopwords with different content go either way', () => {
    // Both share "go" and "to" with the command; only the phones differ.
    expect(decideCommand('go to sleep', 'go to slip', phonesOf)).toBe('go to sleep');
    expect(decideCommand('go to sleep', 'go to banana bread', phonesOf)).toBeNull();
  });

  it('a shared content word wins even when the phones are far apart', () => {
    const free = 'what is the weather like today in the room';
    expect(phoneSimilarity(phonesOf(free), phonesOf('watch the room'))).toBeLessThan(COMMAND_SIMILARITY);
    expect(decideCommand('watch the room', free, phonesOf)).toBe('watch the room');
  });

  describe('at the COMMAND_SIMILARITY threshold (synthetic phones)', () => {
    // Command: 10 phones; free text: k of them replaced → similarity 1 − k/10.
    const commandPhones = ['P0', 'P1', 'P2', 'P3', 'P4', 'P5', 'P6', 'P7', 'P8', 'P9'];
    const freePhones = (k: number) => commandPhones.map((p, i) => (i < k ? `X${i}` : p));
    const synthetic = (k: number) => (text: string) => (text === 'cmd' ? commandPhones : freePhones(k));

    it('COMMAND_SIMILARITY is 0.3', () => {
      expect(COMMAND_SIMILARITY).toBe(0.3);
    });

    it.each([
      [6, 'cmd'],
      [7, 'cmd'], // 0.3: at the threshold counts
      [8, null],
      [10, null],
    ])('%i of 10 phones differ → %s', (k, expected) => {
      expect(decideCommand('cmd', 'other', synthetic(k))).toBe(expected);
    });
  });
});

describe('phoneSimilarity', () => {
  it.each([
    { name: 'equal sequences', a: ['K', 'IY', 'P'], b: ['K', 'IY', 'P'], expected: 1 },
    { name: 'both empty', a: [], b: [], expected: 1 },
    { name: 'one empty', a: ['K'], b: [], expected: 0 },
    { name: 'disjoint, same length', a: ['A', 'B', 'C'], b: ['X', 'Y', 'Z'], expected: 0 },
    { name: 'disjoint, different lengths', a: ['A', 'B'], b: ['X', 'Y', 'Z', 'W'], expected: 0 },
    { name: 'one substitution in 4', a: ['D', 'AE', 'N', 'S'], b: ['D', 'EH', 'N', 'S'], expected: 0.75 },
    { name: 'one insertion', a: ['A', 'B', 'C', 'D'], b: ['A', 'B', 'X', 'C', 'D'], expected: 0.8 },
    { name: 'kitten / sitting', a: [...'kitten'], b: [...'sitting'], expected: 1 - 3 / 7 },
    { name: 'order matters', a: ['A', 'B'], b: ['B', 'A'], expected: 0 },
  ])('$name → $expected', ({ a, b, expected }) => {
    expect(phoneSimilarity(a, b)).toBeCloseTo(expected, 10);
    expect(phoneSimilarity(b, a)).toBeCloseTo(expected, 10);
  });

  const phones = fc.array(fc.constantFrom('AA', 'AH', 'B', 'D', 'IY', 'K', 'S', 'T'), { maxLength: 12 });

  it('is symmetric, within [0, 1], and 1 exactly for equal sequences (fast-check)', () => {
    fc.assert(
      fc.property(phones, phones, (a, b) => {
        const ab = phoneSimilarity(a, b);
        expect(ab).toBe(phoneSimilarity(b, a));
        expect(ab).toBeGreaterThanOrEqual(0);
        expect(ab).toBeLessThanOrEqual(1);
        expect(ab === 1).toBe(a.join(' ') === b.join(' '));
        expect(phoneSimilarity(a, a)).toBe(1);
      }),
      { numRuns: 500 },
    );
  });

  it('one edit to a sequence of n phones gives 1 − 1/n or more (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom<string>('AA', 'B', 'K'), { minLength: 1, maxLength: 12 }),
        fc.nat(),
        (a, at) => {
          const b = [...a];
          b[at % a.length] = 'ZZ';
          expect(phoneSimilarity(a, b)).toBeCloseTo(1 - 1 / a.length, 10);
        },
      ),
    );
  });
});

describe('commandGrammar', () => {
  it('is a JSGF grammar with one public rule of alternatives', () => {
    expect(commandGrammar(['go to sleep', 'keep watch', 'dance'])).toBe(
      '#JSGF V1.0;\ngrammar commands;\npublic <command> = go to sleep | keep watch | dance;\n',
    );
  });

  it('a single phrase has no alternation bar', () => {
    expect(commandGrammar(['wake up'])).toBe('#JSGF V1.0;\ngrammar commands;\npublic <command> = wake up;\n');
  });
});
