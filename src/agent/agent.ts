// The embedded agent runtime (`deskbot agent`): an ACP v1 agent on stdio that the bridge drives.
// stdout carries the protocol (newline-delimited JSON-RPC 2.0), so this process logs ONLY to stderr.
//
// Methods (ACP v1, @agentclientprotocol/sdk 2.4 app API — the SDK no longer has AgentSideConnection):
//   initialize      → {protocolVersion: 1, agentCapabilities, agentInfo, authMethods: []}
//   authenticate    → {} (nothing to authenticate)
//   session/new     {cwd: absolute path, mcpServers: [...]} → {sessionId}; a relative cwd is -32602
//   session/prompt  {sessionId, prompt: ContentBlock[]} → streams `session/update` notifications
//                   {sessionId, update: {sessionUpdate: 'agent_message_chunk', content: {type: 'text', text}}}
//                   then answers {stopReason: 'end_turn' | 'cancelled'}
//   session/cancel  (notification) {sessionId} → the in-flight prompt answers {stopReason: 'cancelled'}
//   session/close   {sessionId} → {} and the session is forgotten
//   session/load    not supported (agentCapabilities.loadSession = false; the SDK answers -32601)
//
// Session not found: a prompt (or close) naming an unknown session fails with the SDK's
// RequestError.sessionNotFound(id), i.e. JSON-RPC error {code: -32002, message: "Resource not found",
// data: {sessionId}} — the ACP spec's "Resource not found" code; the SDK's ClientContext itself treats
// -32002 on session/close and session/delete as success, which is how clients are meant to recognise it.
import { randomUUID } from 'node:crypto';
import { isAbsolute, resolve } from 'node:path';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { pino } from 'pino';
import { ConfigError, loadConfig } from '../config/index.js';
import { type ChatMessage, type Deadlines, streamChat } from '../providers/openai-client.js';
import type { Logger } from '../util/log.js';
import { VERSION } from '../version.js';
import { MemoryStore } from './memory.js';
import { buildSystemPrompt, seedWorkspace } from './workspace.js';

export interface AgentModelOptions {
  /** OpenAI-compatible base URL including /v1. */
  url: string;
  apiKey: string;
  model: string;
  /** Whole-turn deadline (the SPEC agent provider timeout, 90 s by default). */
  timeoutSec: number;
  maxTokens?: number;
  temperature?: number;
}

export interface AgentLimits {
  /** Sessions kept at once; the least recently used idle one is dropped beyond this. */
  maxSessions: number;
  /** Messages of history (user + assistant) kept per session. */
  historyMessages: number;
  /** Characters of history kept per session. */
  historyChars: number;
  /** Characters of user text taken from one prompt. */
  promptChars: number;
  /** Past conversation turns recalled into the system prompt by keyword search. */
  recallTurns: number;
}

export const DEFAULT_AGENT_LIMITS: AgentLimits = {
  maxSessions: 64,
  historyMessages: 24,
  historyChars: 24_000,
  promptChars: 16_000,
  recallTurns: 3,
};

export interface RunAgentOptions {
  workspaceDir: string;
  model: AgentModelOptions;
  logger: Logger;
  limits?: Partial<AgentLimits>;
  /** The protocol byte streams; default process.stdin / process.stdout. */
  io?: { input: ReadableStream<Uint8Array>; output: WritableStream<Uint8Array> };
}

/** Spoken when the model fails before saying anything (the bridge keeps a leading allowed emoji). */
export const APOLOGY = "😢 Sorry, I can't think straight right now. Please ask me again in a moment.";
/** Spoken when the model fails part-way through a reply. */
export const APOLOGY_MIDWAY = ' Sorry, I lost my train of thought.';

interface Turn {
  controller: AbortController;
  done: Promise<void>;
}

interface Session {
  id: string;
  cwd: string;
  history: ChatMessage[];
  turn: Turn | null;
  lastUsed: number;
}

/**
 * Serves one ACP client over the given streams (stdin/stdout by default) until the client goes away.
 * Seeds the workspace first, so every persona file exists before `initialize` is answered.
 */
export async function runAgent(options: RunAgentOptions): Promise<void> {
  const { logger } = options;
  await seedWorkspace(options.workspaceDir);
  const memory = await MemoryStore.open(options.workspaceDir);
  let io = options.io;
  if (!io) {
    // stdout is the protocol: anything printed by accident would corrupt it, so console output goes
    // to stderr, and a closed stdout (the client died) just ends the connection.
    console.log = console.error;
    console.info = console.error;
    console.debug = console.error;
    process.stdout.on('error', (error) => logger.debug({ err: error }, 'stdout closed'));
    io = {
      input: Readable.toWeb(process.stdin) as unknown as ReadableStream<Uint8Array>,
      output: Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
    };
  }
  const agent = new DeskAgent(options, memory);
  const connection = agent.app().connect(acp.ndJsonStream(io.output, io.input));
  logger.info({ workspace: options.workspaceDir, model: options.model.model }, 'ACP agent ready on stdio');
  await connection.closed;
  agent.closeAll();
  logger.info('ACP client disconnected');
}

class DeskAgent {
  private readonly sessions = new Map<string, Session>();
  private readonly limits: AgentLimits;
  private readonly logger: Logger;

  constructor(
    private readonly options: RunAgentOptions,
    private readonly memory: MemoryStore,
  ) {
    this.limits = { ...DEFAULT_AGENT_LIMITS, ...options.limits };
    this.logger = options.logger;
  }

  app(): acp.AgentApp {
    return acp
      .agent({ name: 'deskbot-agent' })
      .onRequest(acp.methods.agent.initialize, ({ params }) => {
        this.logger.info(
          { client: params.clientInfo?.name, protocolVersion: params.protocolVersion },
          'initialize',
        );
        return {
          // We speak only v1; a client asking for another version decides whether to go on.
          protocolVersion: acp.PROTOCOL_VERSION,
          agentCapabilities: {
            loadSession: false,
            promptCapabilities: { image: false, audio: false, embeddedContext: false },
            mcpCapabilities: { http: false, sse: false },
            sessionCapabilities: { close: {} },
          },
          agentInfo: { name: 'deskbot-agent', title: 'deskbot embedded agent', version: VERSION },
          authMethods: [],
        };
      })
      .onRequest(acp.methods.agent.authenticate, () => ({}))
      .onRequest(acp.methods.agent.session.new, ({ params }) => this.newSession(params))
      .onRequest(acp.methods.agent.session.prompt, (context) => this.prompt(context))
      .onRequest(acp.methods.agent.session.close, ({ params }) => {
        const session = this.sessions.get(params.sessionId);
        if (!session) throw acp.RequestError.sessionNotFound(params.sessionId);
        session.turn?.controller.abort();
        this.sessions.delete(params.sessionId);
        return {};
      })
      .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
        const turn = this.sessions.get(params.sessionId)?.turn;
        this.logger.debug({ sessionId: params.sessionId, inFlight: Boolean(turn) }, 'cancel');
        turn?.controller.abort();
      });
  }

  closeAll(): void {
    for (const session of this.sessions.values()) session.turn?.controller.abort();
    this.sessions.clear();
  }

  private newSession(params: acp.NewSessionRequest): acp.NewSessionResponse {
    if (!isAbsolute(params.cwd)) {
      throw acp.RequestError.invalidParams({ cwd: params.cwd }, 'cwd must be an absolute path');
    }
    if (params.mcpServers.length > 0) {
      this.logger.info({ count: params.mcpServers.length }, 'MCP servers offered; this agent uses none');
    }
    this.evictIfFull();
    const id = randomUUID();
    this.sessions.set(id, { id, cwd: params.cwd, history: [], turn: null, lastUsed: Date.now() });
    this.logger.info({ sessionId: id, sessions: this.sessions.size }, 'session created');
    return { sessionId: id };
  }

  private evictIfFull(): void {
    while (this.sessions.size >= this.limits.maxSessions) {
      const sessions = [...this.sessions.values()];
      const idle = sessions.filter((s) => !s.turn);
      const victim = (idle.length > 0 ? idle : sessions).reduce((a, b) => (a.lastUsed <= b.lastUsed ? a : b));
      victim.turn?.controller.abort();
      this.sessions.delete(victim.id);
      this.logger.info({ sessionId: victim.id }, 'session dropped (too many sessions)');
    }
  }

  private async prompt({
    params,
    signal,
    client,
  }: acp.AgentRequestContext<acp.PromptRequest>): Promise<acp.PromptResponse> {
    const session = this.sessions.get(params.sessionId);
    if (!session) throw acp.RequestError.sessionNotFound(params.sessionId);
    const userText = promptText(params.prompt).slice(0, this.limits.promptChars).trim();
    if (!userText) throw acp.RequestError.invalidParams(undefined, 'the prompt has no text');
    session.lastUsed = Date.now();
    // One turn at a time per session: a new prompt supersedes the one in flight (voice barge-in).
    while (session.turn) {
      session.turn.controller.abort();
      await session.turn.done;
    }
    const controller = new AbortController();
    const onRequestAbort = () => controller.abort();
    // The request signal aborts on $/cancel_request and when the connection closes.
    signal.addEventListener('abort', onRequestAbort, { once: true });
    let finish!: () => void;
    const turn: Turn = {
      controller,
      done: new Promise<void>((done) => {
        finish = done;
      }),
    };
    session.turn = turn;
    try {
      return await this.runTurn(session, userText, controller.signal, (text) =>
        client.notify(acp.methods.client.session.update, {
          sessionId: session.id,
          update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } },
        }),
      );
    } finally {
      signal.removeEventListener('abort', onRequestAbort);
      if (session.turn === turn) session.turn = null;
      session.lastUsed = Date.now();
      finish();
    }
  }

  private async runTurn(
    session: Session,
    userText: string,
    signal: AbortSignal,
    say: (text: string) => Promise<void>,
  ): Promise<acp.PromptResponse> {
    const started = Date.now();
    const { model } = this.options;
    const messages: ChatMessage[] = [
      { role: 'system', content: await this.systemPrompt(userText) },
      ...session.history,
      { role: 'user', content: userText },
    ];
    if (signal.aborted) return { stopReason: 'cancelled' };
    const deadlines: Deadlines = {
      responseMs: model.timeoutSec * 1000,
      idleMs: Math.min(model.timeoutSec * 1000, 30_000),
      totalMs: model.timeoutSec * 1000,
    };
    let reply = '';
    try {
      const stream = streamChat(
        { url: model.url, apiKey: model.apiKey },
        {
          model: model.model,
          messages,
          ...(model.maxTokens ? { max_tokens: model.maxTokens } : {}),
          ...(model.temperature !== undefined ? { temperature: model.temperature } : {}),
        },
        deadlines,
        signal,
      );
      for await (const chunk of stream) {
        if (signal.aborted) break;
        if (chunk.type !== 'text' || !chunk.text) continue;
        reply += chunk.text;
        await say(chunk.text);
      }
      if (signal.aborted) return this.cancelled(session, started);
      if (!reply.trim()) throw new Error('the model answered with no text');
    } catch (error) {
      if (signal.aborted) return this.cancelled(session, started);
      this.logger.warn(
        { sessionId: session.id, err: (error as Error).message, partial: reply.length },
        'model call failed; apologising',
      );
      await say(reply ? APOLOGY_MIDWAY : APOLOGY);
      return { stopReason: 'end_turn' };
    }
    this.remember(session, userText, reply);
    this.logger.info(
      { sessionId: session.id, ms: Date.now() - started, chars: reply.length },
      'turn complete',
    );
    return { stopReason: 'end_turn' };
  }

  private cancelled(session: Session, started: number): acp.PromptResponse {
    this.logger.info({ sessionId: session.id, ms: Date.now() - started }, 'turn cancelled');
    return { stopReason: 'cancelled' };
  }

  /** Appends the turn and trims the history to its message and character bounds (whole pairs first). */
  private remember(session: Session, userText: string, reply: string): void {
    const history = session.history;
    history.push({ role: 'user', content: userText }, { role: 'assistant', content: reply });
    const chars = () => history.reduce((sum, m) => sum + (m.content?.length ?? 0), 0);
    while (
      history.length > this.limits.historyMessages ||
      (history.length > 2 && chars() > this.limits.historyChars)
    ) {
      history.splice(0, 2);
    }
  }

  /** Persona files (MEMORY.md facts included) + the date, and past turns that match the user's words. */
  private async systemPrompt(userText: string): Promise<string> {
    const base = await buildSystemPrompt(this.options.workspaceDir);
    if (this.limits.recallTurns <= 0) return base;
    try {
      await this.memory.refresh();
      const turns = this.memory
        .search(userText, this.limits.recallTurns * 2)
        .filter((hit) => hit.source === 'turn')
        .slice(0, this.limits.recallTurns);
      if (turns.length === 0) return base;
      const lines = turns.map((hit) => `(${hit.date}) ${hit.text.slice(0, 600).replace(/\n/g, ' / ')}`);
      return `${base}\n\n## Earlier conversations that may be relevant\n\n${lines.join('\n')}`;
    } catch (error) {
      this.logger.warn({ err: (error as Error).message }, 'memory recall failed');
      return base;
    }
  }
}

/** The user's words: text blocks, plus the text of embedded resources and the names of links. */
function promptText(blocks: acp.ContentBlock[]): string {
  const parts: string[] = [];
  for (const block of blocks) {
    if (block.type === 'text') parts.push(block.text);
    else if (block.type === 'resource_link') parts.push(`[${block.name}](${block.uri})`);
    else if (block.type === 'resource' && 'text' in block.resource) parts.push(block.resource.text);
  }
  return parts.join('\n');
}

/**
 * `deskbot agent`: reads the config (YAML + env), then serves ACP on stdio until stdin closes.
 * Workspace = <data_dir>/workspace; model URL = agent.model_url || cloud.url; key = agent.api_key ||
 * cloud.api_key; model = agent.model; turn deadline = agent.turn_timeout. Returns the exit code
 * (78 on a configuration error, reported on stderr).
 */
export async function main(): Promise<number> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`deskbot agent: configuration error: ${error.message}\n`);
      return 78;
    }
    throw error;
  }
  const logger = pino(
    {
      name: 'deskbot-agent',
      level: config.log_level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ dest: 2, sync: true }),
  );
  await runAgent({
    workspaceDir: resolve(config.data_dir, 'workspace'),
    model: {
      url: config.agent.model_url || config.cloud.url,
      apiKey: config.agent.api_key || config.cloud.api_key,
      model: config.agent.model,
      timeoutSec: config.agent.turn_timeout,
    },
    logger,
  });
  return 0;
}
