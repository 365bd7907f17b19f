// The bridge's ACP client: one long-lived agent child spoken to over stdio (JSON-RPC 2.0, newline-delimited),
// a per-conversation session cache with rotation (DESIGN §3), serialised turns per conversation, a deadline per
// turn, crash recovery with exponential backoff, and refusals for every agent-to-client request we do not offer.
// This module runs turns; the pieces it composes live beside it:
//   acp-runtime.ts     the child's generations: spawn, initialize, readiness, respawn, health
//   acp-child.ts       the child as a process: spawn, stderr tail, process-group termination, backoff
//   acp-connection.ts  our side of the connection: session updates in, refusals out
//   acp-sessions.ts    the session cache (rotation, LRU eviction) and the per-conversation turn queue
//   acp-errors.ts      AcpClientError and the session-not-found rule
//
// SDK note: @agentclientprotocol/sdk 2.x removed ClientSideConnection; the client side is
// `client().onRequest(...).onNotification(...).connect(ndJsonStream(...))` and peer calls go through
// `connection.agent.request(method, params)` / `.notify(...)`.
import { isAbsolute } from 'node:path';
import { methods, type SessionNotification } from '@agentclientprotocol/sdk';
import type { Logger } from '../util/log.js';
import { raceSignal, withTimeout } from './acp-async.js';
import { AcpClientError, isSessionNotFound } from './acp-errors.js';
import { AgentRuntime, type Ready } from './acp-runtime.js';
import { SessionCache, type SessionEntry, TurnQueue } from './acp-sessions.js';

export { AcpClientError, type AcpErrorCode, isSessionNotFound } from './acp-errors.js';

export interface AcpClientOptions {
  /** argv of the agent (AGENT_CMD split by the caller). */
  command: string[];
  /** Absolute; sent as session/new `cwd`, and the child's working directory when it exists. */
  cwd: string;
  /** Overlaid on process.env for the child; an undefined value removes that variable. */
  env?: Record<string, string | undefined>;
  logger: Logger;
  /** Per-turn deadline, counted from the prompt() call (queueing and respawn waits included). */
  turnTimeoutMs: number;
  rotation: { idleMs: number; maxTurns: number; maxAgeMs: number };
  /** Backoff after a crash: baseMs doubling to maxMs; reset once a child stayed up for resetAfterMs. */
  respawn?: { baseMs: number; maxMs: number; resetAfterMs?: number };
  initializeTimeoutMs?: number;
  limits?: {
    /** Cached sessions (least recently used idle ones evicted beyond this), and conversations with a turn
     *  running or queued: a new conversation beyond it is refused with 'busy'. Default 64, the embedded
     *  agent's own session limit. */
    maxSessions?: number;
    /** Prompts waiting behind the running one, per conversation; more are rejected with 'busy'. Default 4. */
    maxQueuedPerConversation?: number;
    /** After a cancel, how long the conversation waits for the agent to end the turn before the session is
     *  treated as tainted (dropped, so the next turn gets a fresh one). Default 2000. */
    cancelGraceMs?: number;
  };
}

export interface PromptOptions {
  onChunk?: (text: string) => void;
  signal?: AbortSignal;
  /** Reject at once with 'unavailable' while the runtime is down (crashed and backing off, or its launch
   *  fails while this turn waits) instead of waiting for a respawn, up to the turn deadline. For callers that
   *  have a fallback answer and a person waiting for it. */
  failWhenDown?: boolean;
}

export interface PromptResult {
  text: string;
  stopReason: string;
}

export interface AcpClientStats {
  spawns: number;
  crashes: number;
  sessions: number;
  rotations: number;
  cancels: number;
}

/** The text streamed so far for a turn in flight, keyed by its session. */
interface LiveTurn {
  chunks: string[];
  onChunk: ((text: string) => void) | undefined;
  live: boolean;
}

/** What a turn leaves behind: the conversation stays queued until `until` settles (a cancelled turn the
 *  agent has not ended yet). */
interface TurnHold {
  until?: Promise<unknown>;
}

export class AcpClient {
  readonly stats: AcpClientStats = { spawns: 0, crashes: 0, sessions: 0, rotations: 0, cancels: 0 };

  private readonly log: Logger;
  private readonly cancelGraceMs: number;
  private readonly maxSessions: number;
  private readonly runtime: AgentRuntime;
  private readonly sessions: SessionCache;
  private readonly turns: TurnQueue;
  private readonly liveTurns = new Map<string, LiveTurn>();
  private closing: Promise<void> | null = null;

  constructor(private readonly options: AcpClientOptions) {
    if (options.command.length === 0 || !options.command[0])
      throw new TypeError('AcpClient: empty agent command');
    if (!isAbsolute(options.cwd))
      throw new TypeError(`AcpClient: cwd must be absolute, got "${options.cwd}"`);
    this.log = options.logger;
    this.cancelGraceMs = options.limits?.cancelGraceMs ?? 2000;
    this.maxSessions = Math.max(1, options.limits?.maxSessions ?? 64);
    this.turns = new TurnQueue(Math.max(0, options.limits?.maxQueuedPerConversation ?? 4));
    this.runtime = new AgentRuntime({
      command: options.command,
      cwd: options.cwd,
      env: options.env,
      logger: options.logger,
      initializeTimeoutMs: options.initializeTimeoutMs ?? 15_000,
      respawn: {
        baseMs: options.respawn?.baseMs ?? 500,
        maxMs: options.respawn?.maxMs ?? 30_000,
        resetAfterMs: options.respawn?.resetAfterMs ?? 10_000,
      },
      stats: this.stats,
      onSessionUpdate: (notification) => this.onSessionUpdate(notification),
      onDown: () => this.sessions.clear(),
    });
    this.sessions = new SessionCache({
      rotation: options.rotation,
      maxSessions: this.maxSessions,
      stats: this.stats,
      logger: options.logger,
      isBusy: (conversation) => this.turns.isBusy(conversation),
      closeOnAgent: (entry) => this.runtime.closeSession(entry.gen, entry.sessionId),
    });
  }

  /** Cached agent sessions (the ACP session gauge). */
  get activeSessions(): number {
    return this.sessions.size;
  }

  /** The agent child's process id; undefined while none runs. */
  get pid(): number | undefined {
    return this.runtime.pid;
  }

  /** Spawns the child and waits for its initialize answer. On failure it rejects, and keeps retrying in the
   *  background with backoff until close(). */
  start(): Promise<void> {
    return this.runtime.start();
  }

  async prompt(conversation: string, text: string, opts: PromptOptions = {}): Promise<PromptResult> {
    if (this.runtime.closed) throw new AcpClientError('closed', 'ACP client is closed');
    if (opts.signal?.aborted)
      throw new AcpClientError('aborted', 'turn aborted by the caller before it started');
    this.runtime.startLazily();
    // Known down: answering now beats queuing behind a respawn that may never come up.
    const down = opts.failWhenDown ? this.runtime.downError() : undefined;
    if (down) throw down;
    // Every busy conversation pins its session (an evicted one would fail its turn), so the number of them
    // is what the session limit bounds; refusing a new one now lets the caller retry instead of waiting.
    if (!this.turns.isBusy(conversation) && this.turns.busyConversations >= this.maxSessions) {
      throw new AcpClientError(
        'busy',
        `${this.turns.busyConversations} conversations already have a turn running (limit ${this.maxSessions})`,
      );
    }

    const turn = new AbortController();
    const deadline = setTimeout(
      () => turn.abort(new AcpClientError('timeout', `agent turn exceeded ${this.options.turnTimeoutMs} ms`)),
      this.options.turnTimeoutMs,
    );
    const onCallerAbort = () => turn.abort(new AcpClientError('aborted', 'turn aborted by the caller'));
    opts.signal?.addEventListener('abort', onCallerAbort, { once: true });
    const hold: TurnHold = {};
    let release: (() => void) | undefined;
    try {
      release = await this.turns.acquire(conversation, turn.signal);
      return await this.runTurn(conversation, text, opts, turn.signal, hold);
    } finally {
      clearTimeout(deadline);
      opts.signal?.removeEventListener('abort', onCallerAbort);
      if (release) {
        const done = release;
        if (hold.until) void hold.until.finally(done);
        else done();
      }
    }
  }

  /** True only when the child is up, initialized and answers a round trip within timeoutMs. */
  health(timeoutMs = 2000): Promise<boolean> {
    return this.runtime.health(timeoutMs);
  }

  close(): Promise<void> {
    if (this.closing) return this.closing;
    const error = new AcpClientError('closed', 'ACP client closed');
    this.turns.failAll(error);
    this.sessions.clear();
    this.closing = this.runtime.close(error);
    return this.closing;
  }

  /** Runs the turn on the conversation's session; if the agent has lost that session, once more on a new one. */
  private async runTurn(
    conversation: string,
    text: string,
    opts: PromptOptions,
    signal: AbortSignal,
    hold: TurnHold,
  ): Promise<PromptResult> {
    let retried = false;
    for (;;) {
      const ready = await this.runtime.waitReady(signal, opts.failWhenDown);
      const entry = await this.sessionFor(conversation, ready, signal);
      const outcome = await this.promptOnce(conversation, entry, ready, text, opts.onChunk, signal, hold);
      if (outcome !== 'session_not_found') return outcome;
      this.sessions.drop(conversation, entry, 'agent does not know the session', false);
      if (retried) {
        throw new AcpClientError(
          'session_not_found',
          'the agent refused a freshly created session as unknown',
        );
      }
      retried = true;
      this.log.info(
        { conversation, sessionId: entry.sessionId },
        'agent lost the session; retrying once on a new one',
      );
    }
  }

  private async sessionFor(conversation: string, ready: Ready, signal: AbortSignal): Promise<SessionEntry> {
    const cached = this.sessions.reuse(conversation, ready.gen);
    if (cached) return cached;
    this.sessions.makeRoom(conversation);
    const request = ready.conn.agent.request(methods.agent.session.new, {
      cwd: this.options.cwd,
      mcpServers: [],
    });
    let created: { sessionId: string };
    try {
      created = await raceSignal(request, signal);
    } catch (error) {
      if (signal.aborted && error === signal.reason) {
        // The agent may still create it: close it when it does, so nothing leaks on its side.
        request.then(
          (late) => this.runtime.closeSession(ready.gen, late.sessionId),
          () => {},
        );
      }
      throw this.runtime.classify(error, ready);
    }
    return this.sessions.add(conversation, created.sessionId, ready.gen);
  }

  private async promptOnce(
    conversation: string,
    entry: SessionEntry,
    ready: Ready,
    text: string,
    onChunk: ((text: string) => void) | undefined,
    signal: AbortSignal,
    hold: TurnHold,
  ): Promise<PromptResult | 'session_not_found'> {
    const { sessionId } = entry;
    const live: LiveTurn = { chunks: [], onChunk, live: true };
    this.liveTurns.set(sessionId, live);
    const forget = () => {
      live.live = false;
      if (this.liveTurns.get(sessionId) === live) this.liveTurns.delete(sessionId);
    };
    entry.turns++;
    entry.lastUsedAt = Date.now();
    const request = ready.conn.agent.request(methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: 'text', text }],
    });
    try {
      const response = await raceSignal(request, signal);
      // The SDK settles a response synchronously but walks notifications through an async handler chain, so
      // the last chunks can still be in flight here: one macrotask lets them land (they are already read).
      await new Promise<void>((resolve) => setImmediate(resolve));
      forget();
      entry.lastUsedAt = Date.now();
      return { text: live.chunks.join(''), stopReason: response.stopReason };
    } catch (error) {
      if (signal.aborted && error === signal.reason) {
        live.live = false;
        this.stats.cancels++;
        ready.conn.agent.notify(methods.agent.session.cancel, { sessionId }).catch(() => {});
        this.log.info(
          { conversation, sessionId, why: (signal.reason as AcpClientError).code },
          'turn cancelled; session/cancel sent',
        );
        // Keep the conversation's lane until the agent ends the turn; if it does not, the session is tainted.
        hold.until = withTimeout(
          request.then(
            () => true,
            () => true,
          ),
          this.cancelGraceMs,
          false,
        ).then((acknowledged) => {
          forget();
          if (!acknowledged) this.sessions.drop(conversation, entry, 'agent ignored session/cancel', true);
        });
        throw signal.reason;
      }
      forget();
      if (isSessionNotFound(error, sessionId) && this.runtime.isLive(ready)) return 'session_not_found';
      throw this.runtime.classify(error, ready);
    }
  }

  private onSessionUpdate(notification: SessionNotification): void {
    const turn = this.liveTurns.get(notification.sessionId);
    if (!turn?.live) return;
    const { update } = notification;
    if (update.sessionUpdate !== 'agent_message_chunk' || update.content.type !== 'text') return;
    const text = update.content.text;
    if (!text) return;
    turn.chunks.push(text);
    try {
      turn.onChunk?.(text);
    } catch (error) {
      this.log.warn({ err: (error as Error).message }, 'onChunk callback threw');
    }
  }
}
