// The bridge's LAN API: the agent-path message routes and the voice server's tool/memory routes.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { MemoryStore } from '../agent/memory.js';
import { ESCALATION_TOOLS } from '../providers/llm/tools.js';
import { errorBody, parseBody } from '../util/http-error.js';
import { type AcpClient, AcpClientError } from './acp-client.js';
import { type EscalationDeps, escalate } from './escalation.js';
import {
  AGENT_FALLBACK_REPLY,
  type ChannelNames,
  finishReply,
  isEmptyReply,
  isRobotChannel,
  sandwich,
} from './message-rules.js';
import { type Refusal, streamSentences } from './ndjson.js';

export interface ApiRouteOptions {
  agent: () => AcpClient;
  memory: () => Promise<MemoryStore>;
  escalation: EscalationDeps;
  channels: ChannelNames;
  kidMode: () => boolean;
  maxSentences: number;
  /** Today's calendar as prompt lines (scrubbed), offered to the agent on the robot channel. */
  calendarText?: () => Promise<string>;
}

/** What a caller refused for load should wait before trying again: about one short agent turn. */
const BUSY_RETRY_AFTER_SEC = 2;

/** The agent refused the turn for load (too many conversations, or this one's queue full): 503 busy with
 *  Retry-After, so the caller can tell "try again" from an answer. Any other failure gets the fallback. */
function busyRefusal(error: unknown): Refusal | undefined {
  if (!(error instanceof AcpClientError) || error.code !== 'busy') return undefined;
  return {
    status: 503,
    code: 'busy',
    message: `the agent is busy: ${error.message}`,
    headers: { 'retry-after': String(BUSY_RETRY_AFTER_SEC) },
  };
}

/** The calendar is cached; a feed still loading must not hold a voice turn up for longer than this. */
const CALENDAR_WAIT_MS = 500;

const text = (max: number) => z.string().max(max);
const schemas = {
  message: z.object({
    content: text(8000).trim().min(1),
    channel: text(100),
    session_id: text(200).optional(),
  }),
  escalate: z.object({
    tool: z.enum(ESCALATION_TOOLS),
    args: z.record(z.string(), z.unknown()).default({}),
    session_id: text(200),
  }),
  remember: z.object({ fact: text(4000).trim().min(1), session_id: text(200) }),
  memoryLog: z.object({ user: text(8000), assistant: text(8000), session_id: text(200) }),
};

export function registerApiRoutes(app: FastifyInstance, options: ApiRouteOptions): void {
  /** The agent's input: the robot channel gets the instruction sandwich (kid rules in kid mode); others pass raw. */
  const agentInput = async (body: z.infer<typeof schemas.message>) =>
    isRobotChannel(body.channel, options.channels)
      ? sandwich(body.content, options.kidMode(), await calendarContext())
      : body.content;
  const calendarContext = async () => {
    if (!options.calendarText) return '';
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(''), CALENDAR_WAIT_MS);
    });
    try {
      return await Promise.race([options.calendarText().catch(() => ''), late]);
    } finally {
      clearTimeout(timer);
    }
  };
  const conversation = (body: z.infer<typeof schemas.message>) =>
    body.session_id || `channel:${body.channel}`;

  app.post('/api/message', async (request, reply) => {
    const body = parseBody(schemas.message, request.body);
    const signal = callerGone(reply);
    try {
      const { text, stopReason } = await options
        .agent()
        .prompt(conversation(body), await agentInput(body), { signal, failWhenDown: true });
      if (!isEmptyReply(text)) return { response: finishReply(text, options.maxSentences) };
      request.log.warn(
        { code: 'empty_reply', stopReason },
        'the agent said nothing; answering with the fallback',
      );
      return { response: AGENT_FALLBACK_REPLY };
    } catch (error) {
      const refusal = busyRefusal(error);
      if (refusal) {
        return reply
          .code(refusal.status)
          .headers(refusal.headers ?? {})
          .send(errorBody(refusal.code, refusal.message));
      }
      request.log.warn(
        { err: (error as Error).message, code: (error as { code?: unknown }).code },
        'agent turn failed; answering with the fallback',
      );
      return { response: AGENT_FALLBACK_REPLY };
    }
  });

  app.post('/api/message/stream', async (request, reply) => {
    const body = parseBody(schemas.message, request.body);
    await streamSentences(
      reply,
      {
        maxSentences: options.maxSentences,
        fallback: AGENT_FALLBACK_REPLY,
        logger: request.log,
        refuse: busyRefusal,
      },
      async (onDelta, signal) => {
        const input = await agentInput(body);
        await options
          .agent()
          .prompt(conversation(body), input, { signal, onChunk: onDelta, failWhenDown: true });
      },
    );
  });

  app.post('/api/voice/escalate', async (request, reply) => {
    const body = parseBody(schemas.escalate, request.body);
    request.log.info({ tool: body.tool, session: body.session_id }, 'escalation');
    return { result: await escalate(body.tool, body.args, options.escalation, callerGone(reply)) };
  });

  app.post('/api/voice/remember', async (request) => {
    const body = parseBody(schemas.remember, request.body);
    await (await options.memory()).remember(body.fact, { sessionId: body.session_id });
    return { ok: true };
  });

  app.post('/api/voice/memory_log', async (request) => {
    const body = parseBody(schemas.memoryLog, request.body);
    await (await options.memory()).logTurn(body.user, body.assistant, { sessionId: body.session_id });
    return { ok: true };
  });
}

/** Aborts when the caller goes away before the answer was sent, so its agent turn or tool call stops too
 *  (the request's own 'close' fires once its body is read, so the response side decides). */
function callerGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}
