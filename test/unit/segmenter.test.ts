// The reply segmenter (streamed model text → speakable segments) and cleanForSpeech.
// Every table case is fed whole, character by character and in random chunkings: a streamed reply must be
// cut the same way however the network happened to split it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cleanForSpeech, Segmenter, type SegmenterOptions } from '../../src/voice/segmenter.js';

/** Pushes the chunks in order, then flushes; returns every segment. */
function segments(chunks: string[], options?: SegmenterOptions): string[] {
  const segmenter = new Segmenter(options);
  const out: string[] = [];
  for (const chunk of chunks) out.push(...segmenter.push(chunk));
  out.push(...segmenter.flush());
  return out;
}

const whole = (text: string, options?: SegmenterOptions) => segments([text], options);
/** Per UTF-16 code unit, which also splits surrogate pairs (a network chunk can end anywhere). */
const unitByUnit = (text: string, options?: SegmenterOptions) => segments(text.split(''), options);

function chunked(text: string, sizes: number[]): string[] {
  const chunks: string[] = [];
  let i = 0;
  let k = 0;
  while (i < text.length) {
    const size = sizes[k++ % sizes.length]!;
    chunks.push(text.slice(i, i + size));
    i += size;
  }
  return chunks;
}

const cases: Array<{ name: string; text: string; expected: string[]; options?: SegmenterOptions }> = [
  {
    name: 'a short first clause does not end at its comma',
    text: 'Well, I think so.',
    expected: ['Well, I think so.'],
  },
  {
    name: 'a first clause of ≥ 8 letters ends at its comma; later ones only at . ! ?',
    text: 'Sure thing my friend, it is sunny today. Bye!',
    expected: ['Sure thing my friend,', 'it is sunny today.', 'Bye!'],
  },
  {
    name: 'commas after the first segment never cut',
    text: 'Sure thing my friend, it is sunny, warm, and bright today. Bye!',
    expected: ['Sure thing my friend,', 'it is sunny, warm, and bright today.', 'Bye!'],
  },
  {
    name: 'a first segment that ended at a sentence end makes later commas plain',
    text: 'Hello there. Sunshine and rainbows, all day long.',
    expected: ['Hello there.', 'Sunshine and rainbows, all day long.'],
  },
  {
    name: 'exactly 8 letters before the comma is enough',
    text: 'Abcd efgh, then the rest.',
    expected: ['Abcd efgh,', 'then the rest.'],
  },
  {
    name: '7 letters before the comma is not',
    text: 'Abcd efg, then the rest.',
    expected: ['Abcd efg, then the rest.'],
  },
  {
    name: 'semicolon and colon are clause breaks too',
    text: 'Here is the plan: we go now. Okay.',
    expected: ['Here is the plan:', 'we go now.', 'Okay.'],
  },
  {
    name: 'a thousands separator is not a clause break',
    text: 'We have about 1,000 apples, friend. Yes.',
    expected: ['We have about 1,000 apples,', 'friend.', 'Yes.'],
  },
  {
    name: 'decimals are not sentence ends',
    text: 'It costs 3.5 dollars. Okay.',
    expected: ['It costs 3.5 dollars.', 'Okay.'],
  },
  {
    name: 'a decimal at the very end stays whole',
    text: 'The answer is 42.5',
    expected: ['The answer is 42.5'],
  },
  {
    name: 'an ellipsis and ?! stay with their sentence',
    text: 'Hmm... I am not sure. Really?! Yes.',
    expected: ['Hmm...', 'I am not sure.', 'Really?!', 'Yes.'],
  },
  {
    name: 'closing quotes and brackets stay with their sentence',
    text: 'He said "stop." Then he left (quietly.) The end.',
    expected: ['He said "stop."', 'Then he left (quietly.)', 'The end.'],
  },
  {
    name: 'abbreviations do not end a sentence',
    text: 'Mr. Smith met Dr. Jones. Hello.',
    expected: ['Mr. Smith met Dr. Jones.', 'Hello.'],
  },
  {
    name: 'a period inside a token does not end a sentence',
    text: 'Use e.g. this one. Ok.',
    expected: ['Use e.g. this one.', 'Ok.'],
  },
  { name: 'a newline ends a segment', text: 'Line one\nLine two', expected: ['Line one', 'Line two'] },
  {
    name: 'blank lines produce no empty segments',
    text: 'First\n\n\nSecond.\n',
    expected: ['First', 'Second.'],
  },
  {
    name: 'stray punctuation after a sentence starts the next segment (it never ends one)',
    text: 'Hello there. ! Next one.',
    expected: ['Hello there.', '! Next one.'],
  },
  { name: 'emoji-only text is one segment (its emotion still counts)', text: '😊😊😊', expected: ['😊😊😊'] },
  { name: 'punctuation-only text is one segment, never split', text: '... !?', expected: ['... !?'] },
  { name: 'a letterless tail after segments is dropped', text: 'Hello.\n😊\n', expected: ['Hello.'] },
  {
    name: 'a leading emoji stays with the first segment',
    text: '😊 Hello there. Bye.',
    expected: ['😊 Hello there.', 'Bye.'],
  },
  {
    name: 'flush returns the unfinished remainder',
    text: 'no punctuation here',
    expected: ['no punctuation here'],
  },
  { name: 'empty text', text: '', expected: [] },
];

describe('Segmenter table (whole, unit by unit, random chunks)', () => {
  it.each(cases)('$name', ({ text, expected, options }) => {
    expect(whole(text, options)).toEqual(expected);
    expect(unitByUnit(text, options)).toEqual(expected);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 8 }), (sizes) => {
        expect(segments(chunked(text, sizes), options)).toEqual(expected);
      }),
      { numRuns: 50 },
    );
  });
});

describe('Segmenter streaming behaviour', () => {
  it('emits the first segment as soon as its clause ends, before the stream ends', () => {
    const s = new Segmenter();
    expect(s.push('Sure thing my friend')).toEqual([]);
    expect(s.push(',')).toEqual([]); // the next character decides (could be 1,000)
    expect(s.push(' it')).toEqual(['Sure thing my friend,']);
    expect(s.push(' is sunny today.')).toEqual([]);
    expect(s.push(' B')).toEqual(['it is sunny today.']);
    expect(s.flush()).toEqual(['B']);
  });

  it('a final "." waits for the next character: a digit makes it a decimal', () => {
    const s = new Segmenter();
    expect(s.push('It costs 3.')).toEqual([]);
    expect(s.push('5 dollars. ')).toEqual(['It costs 3.5 dollars.']);
    expect(s.flush()).toEqual([]);
  });

  it('flush after flush returns nothing; the segmenter can be reused', () => {
    const s = new Segmenter();
    s.push('One two three');
    expect(s.flush()).toEqual(['One two three']);
    expect(s.flush()).toEqual([]);
  });

  it('respects minFirstClauseChars', () => {
    expect(whole('Well, I think so.', { minFirstClauseChars: 3 })).toEqual(['Well,', 'I think so.']);
    expect(whole('Sure thing my friend, it is.', { minFirstClauseChars: 50 })).toEqual([
      'Sure thing my friend, it is.',
    ]);
  });
});

describe('maxSegmentChars', () => {
  const longSentence = `${'word '.repeat(60).trim()}.`; // 300 characters, one sentence end at the very end

  it.each([
    ['char by char', unitByUnit],
    ['whole', whole],
  ])('a sentence longer than the limit is cut at spaces (%s)', (_name, feed) => {
    const out = feed(longSentence, { maxSegmentChars: 50 });
    expect(out.length).toBeGreaterThan(1);
    for (const segment of out) {
      expect(segment.length).toBeLessThanOrEqual(50);
      expect(segment).toMatch(/^word( word)*\.?$/); // cut between words, never inside one
    }
    expect(out.join(' ')).toBe(longSentence);
  });

  it('a long sentence followed by more text is cut the same way however it is chunked', () => {
    const text = `${longSentence} Short one.`;
    const expected = unitByUnit(text, { maxSegmentChars: 50 });
    expect(expected.every((segment) => segment.length <= 50)).toBe(true);
    expect(whole(text, { maxSegmentChars: 50 })).toEqual(expected);
  });

  it('a word longer than the limit with no space is cut hard at the limit', () => {
    const out = unitByUnit('x'.repeat(120), { maxSegmentChars: 50 });
    expect(out).toEqual(['x'.repeat(50), 'x'.repeat(50), 'x'.repeat(20)]);
  });
});

describe('chunking independence (fast-check)', () => {
  const words = [
    'Hello',
    'world',
    'it',
    'is',
    'sunny',
    'today',
    'my',
    'friend',
    '3.5',
    'Mr.',
    'Smith',
    'e.g.',
  ];
  const sentenceEnds = ['.', '!', '?', '...', '?!', '.\n'];
  const sentence = fc
    .tuple(
      fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 12 }),
      fc.option(fc.integer({ min: 1, max: 11 }), { nil: undefined }),
      fc.constantFrom(...sentenceEnds),
    )
    .map(
      ([ws, commaAt, end]) =>
        ws
          .map((w, i) => (commaAt !== undefined && i === commaAt - 1 && i < ws.length - 1 ? `${w},` : w))
          .join(' ') + end,
    );
  const wellFormed = fc.array(sentence, { minLength: 1, maxLength: 6 }).map((s) => s.join(' '));
  const sizes = fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 10 });

  it('well-formed replies: same segments whole, unit by unit and in random chunks', () => {
    fc.assert(
      fc.property(wellFormed, sizes, (text, chunkSizes) => {
        const expected = whole(text);
        expect(unitByUnit(text)).toEqual(expected);
        expect(segments(chunked(text, chunkSizes))).toEqual(expected);
        // Nothing is lost: the segments hold every non-space character, in order.
        expect(expected.join('').replace(/\s/g, '')).toBe(text.replace(/\s/g, ''));
      }),
      { numRuns: 300 },
    );
  });

  it('any text (stray punctuation, emoji, long runs): same segments whatever the chunking', () => {
    const token = fc.constantFrom(
      'Hello',
      'world',
      'today',
      '3.5',
      ' ',
      ' ',
      ' ',
      '.',
      ',',
      '!',
      '?',
      '...',
      '\n',
      '😊',
    );
    const text = fc.array(token, { maxLength: 40 }).map((t) => t.join(''));
    fc.assert(
      fc.property(text, sizes, (t, chunkSizes) => {
        const options = { maxSegmentChars: 30 };
        const expected = whole(t, options);
        expect(unitByUnit(t, options)).toEqual(expected);
        expect(segments(chunked(t, chunkSizes), options)).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe('cleanForSpeech', () => {
  it.each([
    ['**bold** text', 'bold text'],
    ['__bold__ text', 'bold text'],
    ['an *italic* word', 'an italic word'],
    ['an _italic_ word', 'an italic word'],
    ['run `npm test` now', 'run npm test now'],
    ['before ```js\nconst x = 1;\n``` after', 'before after'],
    ['see [the docs](http://example.com/docs) here', 'see the docs here'],
    ['look ![a cat](cat.png) here', 'look a cat here'],
    ['visit https://example.com/path?q=1 now', 'visit now'],
    ['visit http://x.y and go', 'visit and go'],
    ['# Heading', 'Heading'],
    ['### Small heading', 'Small heading'],
    ['- bullet', 'bullet'],
    ['* star bullet', 'star bullet'],
    ['+ plus bullet', 'plus bullet'],
    ['1. item', 'item'],
    ['2) item', 'item'],
    ['> quote', 'quote'],
    ['- one\n- two\n- three', 'one two three'],
    ['| a | b |', 'a b'],
    ['Plain text stays.', 'Plain text stays.'],
    ['  spaced   out  ', 'spaced out'],
  ])('%j → %j', (input, expected) => {
    expect(cleanForSpeech(input)).toBe(expected);
  });
});
