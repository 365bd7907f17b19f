// The NDJSON reply both streaming routes use: one {type:"chunk"} line per sentence (the first with the emoji
// prefix correction, at most maxSentences), then {type:"final"} — or a fallback when nothing was said, or
// {type:"error"} after a partial reply. The producer gets the caller's disconnect as an AbortSignal.
//
// The status line is written with the first line of the body, not before: until then a failure the caller
// should see as an HTTP error (503 busy, say) can still be one, instead of a 200 stream holding a fallback.
import type { FastifyReply } from 'fastify';
import { enforceEmojiPrefix } from '../robot/emotions.js';
import { errorBody } from '../util/http-error.js';
import type { Logger } from '../util/log.js';
import { Segmenter } from '../voice/segmenter.js';
import { isEmptyReply } from './message-rules.js';

/** A failure answered as an HTTP error in the DESIGN §2 shape instead of a fallback reply. */
export interface Refusal {
  status: number;
  code: string;
  message: string;
  headers?: Record<string, string>;
}

export async function streamSentences(
  reply: FastifyReply,
  options: {
    maxSentences: number;
    fallback: string;
    logger: Pick<Logger, 'warn'> | { warn(obj: object, msg: string): void };
    /** Failures the caller gets as an HTTP error, when they happen before anything was streamed. */
    refuse?: (error: unknown) => Refusal | undefined;
  },
  produce: (onDelta: (text: string) => void, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const controller = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  reply.hijack();
  const write = (line: Record<string, unknown>) => {
    if (reply.raw.destroyed) return;
    if (!reply.raw.headersSent) {
      reply.raw.writeHead(200, {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'cache-control': 'no-cache',
      });
    }
    reply.raw.write(`${JSON.stringify(line)}\n`);
  };
  const segmenter = new Segmenter({ minFirstClauseChars: Number.POSITIVE_INFINITY, maxSegmentChars: 2000 });
  const sent: string[] = [];
  // A segment with nothing to say (a lone emoji, "…") is held and put in front of the next real sentence:
  // its emoji still sets the face, and a reply made only of such segments counts as no reply at all.
  let held = '';
  const emit = (sentence: string) => {
    if (sent.length >= options.maxSentences) return;
    if (isEmptyReply(sentence)) {
      held = `${held}${sentence.trim()} `;
      return;
    }
    const text = `${held}${sentence}`;
    held = '';
    const content = sent.length === 0 ? enforceEmojiPrefix(text) : text;
    sent.push(content);
    write({ type: 'chunk', content });
  };
  const fallback = () => {
    held = '';
    emit(options.fallback);
    write({ type: 'final', content: sent.join(' ') });
  };
  try {
    await produce((delta) => {
      for (const sentence of segmenter.push(delta)) emit(sentence);
    }, controller.signal);
    for (const sentence of segmenter.flush()) emit(sentence);
    if (sent.length === 0) {
      options.logger.warn({ code: 'empty_reply' }, 'the agent said nothing; answering with the fallback');
      fallback();
    } else write({ type: 'final', content: sent.join(' ') });
  } catch (error) {
    options.logger.warn(
      { err: (error as Error).message, code: (error as { code?: unknown }).code },
      'streamed reply failed',
    );
    const refusal = reply.raw.headersSent ? undefined : options.refuse?.(error);
    if (refusal) {
      if (!reply.raw.destroyed) {
        reply.raw.writeHead(refusal.status, {
          'content-type': 'application/json; charset=utf-8',
          ...refusal.headers,
        });
        reply.raw.write(JSON.stringify(errorBody(refusal.code, refusal.message)));
      }
    } else if (sent.length === 0) fallback();
    else write({ type: 'error', message: 'the reply stopped mid-way' });
  }
  reply.raw.end();
}
