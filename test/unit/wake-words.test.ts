// Wake words (src/robot/wake-words.ts): which `listen detect` texts are a wake, not a question.
import { describe, expect, it } from 'vitest';
import {
  defaultWakeWords,
  normaliseWakeText,
  STOCK_XIAOZHI_WAKE_WORDS,
  WakeWordList,
} from '../../src/robot/wake-words.js';

describe('the default list', () => {
  const list = new WakeWordList(defaultWakeWords('Pip'));

  it.each([...STOCK_XIAOZHI_WAKE_WORDS])('has the stock xiaozhi wake word %s', (word) => {
    expect(list.matches(word)).toBe(true);
  });

  it.each(['Pip', 'hi pip', 'Hey, Pip!', '  HELLO   pip ', 'ok pip.', '你好小智。', '嘿，你好呀！'])(
    'matches %j (case, punctuation and spaces do not count)',
    (text) => expect(list.matches(text)).toBe(true),
  );

  it.each(['hey pip what time is it', '你好小智今天天气怎么样', 'pipe', 'hi', '', '小智'])(
    'does not match %j (a question that starts with a wake word is still a question)',
    (text) => expect(list.matches(text)).toBe(false),
  );

  it('follows the robot name', () => {
    const named = new WakeWordList(defaultWakeWords('Robo Cat'));
    expect(named.matches('hey robo cat')).toBe(true);
    expect(named.matches('hey pip')).toBe(false);
  });
});

describe('a configured list', () => {
  it('replaces the defaults and is normalised like the texts', () => {
    const list = new WakeWordList(['Hey, Jarvis!', '  ', '!!!']);
    expect(list.matches('hey jarvis')).toBe(true);
    expect(list.matches('你好小智')).toBe(false);
    expect(list.size).toBe(1);
  });

  it('normalises the way the reference server compares (punctuation and emoji removed)', () => {
    expect(normaliseWakeText('😊 Hey,   PIP!? ')).toBe('hey pip');
  });
});
