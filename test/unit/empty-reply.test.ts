// isEmptyReply: what the bridge treats as "the agent said nothing" (answered with the fallback, never as 200
// with a bare emoji).
import { describe, expect, it } from 'vitest';
import { isEmptyReply } from '../../src/bridge/message-rules.js';

describe('isEmptyReply', () => {
  it.each(['', '   ', '\n\t', '😐 ', '😐', '😊😊', '🙂\uFE0F …', '...', '😐 !?'])(
    '%j says nothing',
    (text) => {
      expect(isEmptyReply(text)).toBe(true);
    },
  );

  it.each(['😊 Hi.', 'ok', '😐 42', 'Ça va?', '😮 3.5'])('%j is a reply', (text) => {
    expect(isEmptyReply(text)).toBe(false);
  });
});
