// ThrottledLog: at most `limit` warnings per window, then one 'suppressed' summary in the next window.
import { describe, expect, it } from 'vitest';
import { type Logger, ThrottledLog } from '../../src/util/log.js';

function fakeLogger() {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const logger = {
    warn: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }),
  } as unknown as Logger;
  return { logger, lines };
}

function setup(limit: number, windowMs: number, startMs = 1_000_000) {
  const { logger, lines } = fakeLogger();
  let now = startMs;
  const log = new ThrottledLog(logger, limit, windowMs, () => now);
  return {
    log,
    lines,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const summaries = (lines: Array<{ message: string; fields: Record<string, unknown> }>) =>
  lines.filter((line) => 'suppressed' in line.fields);

describe('ThrottledLog', () => {
  it.each([
    [1, 5],
    [3, 3],
    [3, 10],
    [10, 10_000],
  ])('limit %i, %i warnings in one window: logs min(limit, n) lines and no summary yet', (limit, count) => {
    const { log, lines } = setup(limit, 10_000);
    for (let i = 0; i < count; i++) log.warn({ i }, `bad frame ${i}`);
    expect(lines).toHaveLength(Math.min(limit, count));
    expect(lines.map((l) => l.message)).toEqual(
      Array.from({ length: Math.min(limit, count) }, (_, i) => `bad frame ${i}`),
    );
    expect(summaries(lines)).toHaveLength(0);
  });

  it('emits one summary with the suppressed count in the next window, then logs again', () => {
    const { log, lines, advance } = setup(3, 10_000);
    for (let i = 0; i < 10; i++) log.warn({ code: 'bad' }, 'bad frame');
    advance(10_000);
    log.warn({ code: 'bad' }, 'bad frame');
    expect(lines).toHaveLength(5);
    const summary = lines[3]!;
    expect(summary.message).toMatch(/suppressed/);
    expect(summary.fields.suppressed).toBe(7);
    expect(lines[4]).toEqual({ fields: { code: 'bad' }, message: 'bad frame' });
  });

  it('the new window has its full limit again, and its own count of suppressed lines', () => {
    const { log, lines, advance } = setup(2, 1_000);
    for (let i = 0; i < 5; i++) log.warn({}, 'w1');
    advance(1_000);
    for (let i = 0; i < 6; i++) log.warn({}, 'w2');
    advance(1_000);
    log.warn({}, 'w3');
    expect(lines.map((l) => l.message)).toEqual([
      'w1',
      'w1',
      expect.stringMatching(/suppressed/),
      'w2',
      'w2',
      expect.stringMatching(/suppressed/),
      'w3',
    ]);
    expect(summaries(lines).map((l) => l.fields.suppressed)).toEqual([3, 4]);
  });

  it('no summary when nothing was suppressed', () => {
    const { log, lines, advance } = setup(3, 1_000);
    log.warn({}, 'a');
    log.warn({}, 'b');
    advance(5_000);
    log.warn({}, 'c');
    expect(lines.map((l) => l.message)).toEqual(['a', 'b', 'c']);
  });

  it('stays in the same window until windowMs has passed', () => {
    const { log, lines, advance } = setup(1, 1_000);
    log.warn({}, 'first');
    advance(999);
    log.warn({}, 'suppressed one');
    expect(lines).toHaveLength(1);
    advance(1);
    log.warn({}, 'second');
    expect(lines.map((l) => l.message)).toEqual(['first', expect.stringMatching(/suppressed/), 'second']);
  });

  it('10,000 bad frames over 10 seconds give a bounded number of lines', () => {
    const { log, lines, advance } = setup(10, 10_000);
    for (let i = 0; i < 10_000; i++) {
      log.warn({ i }, 'bad frame');
      advance(1);
    }
    expect(lines.length).toBeLessThanOrEqual(10 + 1 + 10);
  });

  it('defaults to 10 lines per window', () => {
    const { logger, lines } = fakeLogger();
    const log = new ThrottledLog(logger, undefined, undefined, () => 5);
    for (let i = 0; i < 50; i++) log.warn({}, 'x');
    expect(lines).toHaveLength(10);
  });
});
