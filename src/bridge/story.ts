// Story time (SPEC): the bridge bypasses the agent runtime and calls the cloud model directly with a rolling
// context per session, streamed as the same NDJSON the message route uses.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type ChatMessage, type Endpoint, streamChat } from '../providers/openai-client.js';
import { HttpError } from '../util/http-error.js';
import { streamSentences } from './ndjson.js';

export interface StoryOptions {
  cloud: Endpoint & { model: string };
  kidMode: () => boolean;
  /** Messages of story kept per session (rolling). */
  contextMessages?: number;
  maxSentences: number;
}

const STORYTELLER =
  'You are a warm storyteller on a small desk robot. Continue the story the listener asks for, a few short ' +
  'spoken sentences at a time, in English, no markdown. Start each reply with one emoji: 😊 😆 😢 😮 🤔 😠 😐 😍 😴.';
const KID_RULES = ' The listener is a child: keep it gentle, safe and simple.';
export const NO_STORY_MODEL = '😐 I need my cloud model to tell stories, and it is not set up yet.';

export function registerStoryRoute(app: FastifyInstance, options: StoryOptions): void {
  const contexts = new Map<string, ChatMessage[]>();
  const body = z.object({
    content: z.string().trim().min(1).max(4000),
    session_id: z.string().max(200).optional(),
  });

  app.post('/api/story/stream', async (request, reply) => {
    const parsed = body.safeParse(request.body ?? {});
    if (!parsed.success)
      throw new HttpError(400, 'invalid_body', parsed.error.issues[0]?.message ?? 'invalid body');
    const key = parsed.data.session_id ?? 'default';
    const context = contexts.get(key) ?? [];
    context.push({ role: 'user', content: parsed.data.content });
    let told = '';
    await streamSentences(
      reply,
      { maxSentences: options.maxSentences, fallback: NO_STORY_MODEL, logger: request.log },
      async (onDelta, signal) => {
        if (!options.cloud.apiKey) return; // the fallback says why
        const messages: ChatMessage[] = [
          { role: 'system', content: STORYTELLER + (options.kidMode() ? KID_RULES : '') },
          ...context,
        ];
        const deadlines = { responseMs: 30_000, idleMs: 20_000, totalMs: 60_000 };
        for await (const chunk of streamChat(
          options.cloud,
          { model: options.cloud.model, messages, max_tokens: 300 },
          deadlines,
          signal,
        )) {
          if (chunk.type === 'text') {
            told += chunk.text;
            onDelta(chunk.text);
          }
        }
      },
    );
    if (told) context.push({ role: 'assistant', content: told });
    const max = options.contextMessages ?? 20;
    contexts.delete(key); // most recently used last, so the oldest session is evicted first
    contexts.set(key, context.slice(-max));
    while (contexts.size > 64) contexts.delete(contexts.keys().next().value!);
  });
}
