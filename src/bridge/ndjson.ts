// The NDJSON reply both streaming routes use: one {type:"chunk"} line per sentence (the first with the emoji
// prefix correction, at most maxSentences), then {type:"final"} — or a fallback when nothing was said, or
// {type:"error"} after a partial reply. The producer gets the caller's disconnect as an AbortSignal.
import type { FastifyReply } from 'fastify';
import { enforceEmojiPrefix } from '../robot/emotions.js';
import type { Logger } from '../util/log.js';
import { Segmenter } from '../voice/segmenter.js';

export async function streamSentences(
  reply: FastifyReply,
  options: {
    maxSentences: number;
    fallback: string;
    logger: Pick<Logger, 'warn'> | { warn(obj: object, msg: string): void };
  },
  produce: (onDelta: (text: string) => void, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const controller = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  reply.hijack();
  reply.raw.writeHead(200, {
    'content-type': 'application/x-ndjson; charset=utf-8',
    'cache-control': 'no-cache',
  });
  const write = (line: Record<string, unknown>) => {
    if (!reply.raw.destroyed) reply.raw.write(`${JSON.stringify(line)}\n`);
  };
  const segmenter = new Segmenter({ minFirstClauseChars: Number.POSITIVE_INFINITY, maxSegmentChars: 2000 });
  const sent: string[] = [];
  const emit = (sentence: string) => {
    if (sent.length >= options.maxSentences) return;
    const content = sent.length === 0 ? enforceEmojiPrefix(sentence) : sentence;
    sent.push(content);
    write({ type: 'chunk', content });
  };
  try {
    await produce((delta) => {
      for (const sentence of segmenter.push(delta)) emit(sentence);
    }, controller.signal);
    for (const sentence of segmenter.flush()) emit(sentence);
    if (sent.length === 0) emit(options.fallback);
    write({ type: 'final', content: sent.join(' ') });
  } catch (error) {
    options.logger.warn(
      { err: (error as Error).message, code: (error as { code?: unknown }).code },
      'streamed reply failed',
    );
    if (sent.length === 0) {
      emit(options.fallback);
      write({ type: 'final', content: sent.join(' ') });
    } else {
      write({ type: 'error', message: 'the reply stopped mid-way' });
    }
  }
  reply.raw.end();
}
