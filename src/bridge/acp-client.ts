// The bridge's ACP client: one long-lived agent child spoken to over stdio (JSON-RPC 2.0, newline-delimited),
// a per-conversation session cache with rotation (DESIGN §3), serialised turns per conversation, a deadline per
// turn, crash recovery with exponential backoff, and refusals for every agent-to-client request we do not offer.
//
// SDK note: @agentclientprotocol/sdk 2.x removed ClientSideConnection; the client side is
// `client().onRequest(...).onNotification(...).connect(ndJsonStream(...))` and peer calls go through
// `connection.agent.request(method, params)` / `.notify(...)`.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { Readable, Writable } from 'node:stream';
import {
  client as acpClient,
  type ClientConnection,
  type InitializeResponse,
  methods,
  ndJsonStream,
  PROTOCOL_VERSION,
  RequestError,
  type RequestPermissionResponse,
  type SessionNotification,
} from '@agentclientprotocol/sdk';
import type { Logger } from '../util/log.js';
import { VERSION } from '../version.js';

/** Why a prompt failed; the bridge maps these to HTTP statuses and fallback replies. */
export type AcpErrorCode =
  | 'timeout' // the turn deadline passed (session/cancel was sent if the prompt had reached the agent)
  | 'aborted' // the caller's AbortSignal fired (same cancel as above)
  | 'agent_crashed' // the child exited or its stdio broke while this turn was in flight
  | 'busy' // too many prompts already queued for this conversation
  | 'closed' // close() was called
  | 'session_not_found' // the agent refused the session twice in a row (after one retry on a fresh session)
  | 'init_failed' // the child did not answer initialize in time, or with an incompatible protocol version
  | 'agent_error'; // any other JSON-RPC error the agent returned (see rpcCode)

export class AcpClientError extends Error {
  readonly code: AcpErrorCode;
  /** The JSON-RPC error code when the agent itself answered with an error. */
  readonly rpcCode: number | undefined;

  constructor(code: AcpErrorCode, message: string, options: { cause?: unknown; rpcCode?: number } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AcpClientError';
    this.code = code;
    this.rpcCode = options.rpcCode;
  }
}

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
    /** Cached sessions (least recently used evicted beyond this). Default 64. */
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

interface SessionEntry {
  sessionId: string;
  gen: number;
  createdAt: number;
  lastUsedAt: number;
  turns: number;
}

interface Lane {
  busy: boolean;
  waiters: Array<{ grant: () => void; fail: (error: unknown) => void }>;
}

interface LiveTurn {
  chunks: string[];
  onChunk: ((text: string) => void) | undefined;
  live: boolean;
}

interface Ready {
  conn: ClientConnection;
  gen: number;
}

type Phase = 'new' | 'starting' | 'ready' | 'backoff' | 'closed';

/** JSON-RPC "Resource not found"; ACP's answer for an unknown session (data.sessionId names it). */
const RESOURCE_NOT_FOUND = -32002;
/** A request the agent cannot know; any answer (normally -32601) proves its JSON-RPC loop is alive. */
const PING_METHOD = '_deskbot/ping';
const KILL_GRACE_MS = 1500;
const STDERR_KEEP = 20;

export class AcpClient {
  readonly stats: AcpClientStats = { spawns: 0, crashes: 0, sessions: 0, rotations: 0, cancels: 0 };

  private readonly log: Logger;
  private readonly initializeTimeoutMs: number;
  private readonly respawnCfg: { baseMs: number; maxMs: number; resetAfterMs: number };
  private readonly maxSessions: number;
  private readonly maxQueued: number;
  private readonly cancelGraceMs: number;

  private phase: Phase = 'new';
  private gen = 0;
  private downGen = 0;
  private child: ChildProcess | null = null;
  private conn: ClientConnection | null = null;
  private agentCaps: InitializeResponse['agentCapabilities'] = undefined;
  private readyAt = 0;
  private failures = 0;
  private respawnTimer: NodeJS.Timeout | null = null;
  private launching: Promise<void> | null = null;
  private readonly readyWaiters = new Set<{
    resolve: (ready: Ready) => void;
    reject: (error: unknown) => void;
  }>();
  private readonly sessions = new Map<string, SessionEntry>();
  private readonly lanes = new Map<string, Lane>();
  private readonly liveTurns = new Map<string, LiveTurn>();
  private readonly stderrTail: string[] = [];
  private ping: { gen: number; answer: Promise<boolean> } | null = null;
  private closing: Promise<void> | null = null;

  constructor(private readonly options: AcpClientOptions) {
    if (options.command.length === 0 || !options.command[0])
      throw new TypeError('AcpClient: empty agent command');
    if (!isAbsolute(options.cwd))
      throw new TypeError(`AcpClient: cwd must be absolute, got "${options.cwd}"`);
    this.log = options.logger;
    this.initializeTimeoutMs = options.initializeTimeoutMs ?? 15_000;
    this.respawnCfg = {
      baseMs: options.respawn?.baseMs ?? 500,
      maxMs: options.respawn?.maxMs ?? 30_000,
      resetAfterMs: options.respawn?.resetAfterMs ?? 10_000,
    };
    this.maxSessions = Math.max(1, options.limits?.maxSessions ?? 64);
    this.maxQueued = Math.max(0, options.limits?.maxQueuedPerConversation ?? 4);
    this.cancelGraceMs = options.limits?.cancelGraceMs ?? 2000;
  }

  /** Cached agent sessions (the ACP session gauge). */
  get activeSessions(): number {
    return this.sessions.size;
  }

  /** Spawns the child and waits for its initialize answer. On failure it rejects, and keeps retrying in the
   *  background with backoff until close(). */
  start(): Promise<void> {
    switch (this.phase) {
      case 'closed':
        return Promise.reject(new AcpClientError('closed', 'ACP client is closed'));
      case 'ready':
        return Promise.resolve();
      case 'starting':
        return this.launching ?? Promise.resolve();
      case 'new':
        return this.launch();
      case 'backoff': {
        // Wait for the scheduled respawn rather than defeating the backoff.
        const controller = new AbortController();
        const timer = setTimeout(
          () => controller.abort(new AcpClientError('init_failed', 'agent runtime did not come up in time')),
          this.respawnCfg.maxMs + this.initializeTimeoutMs,
        );
        return this.waitReady(controller.signal).then(
          () => clearTimeout(timer),
          (error) => {
            clearTimeout(timer);
            throw error;
          },
        );
      }
    }
  }

  async prompt(conversation: string, text: string, opts: PromptOptions = {}): Promise<PromptResult> {
    if (this.phase === 'closed') throw new AcpClientError('closed', 'ACP client is closed');
    if (opts.signal?.aborted)
      throw new AcpClientError('aborted', 'turn aborted by the caller before it started');
    if (this.phase === 'new') this.start().catch(() => {}); // lazily; failures retry in the background

    const turn = new AbortController();
    const deadline = setTimeout(
      () => turn.abort(new AcpClientError('timeout', `agent turn exceeded ${this.options.turnTimeoutMs} ms`)),
      this.options.turnTimeoutMs,
    );
    const onCallerAbort = () => turn.abort(new AcpClientError('aborted', 'turn aborted by the caller'));
    opts.signal?.addEventListener('abort', onCallerAbort, { once: true });
    const hold: { until?: Promise<unknown> } = {};
    let release: (() => void) | undefined;
    try {
      release = await this.acquireLane(conversation, turn.signal);
      return await this.runTurn(conversation, text, opts.onChunk, turn.signal, hold);
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
  async health(timeoutMs = 2000): Promise<boolean> {
    const conn = this.conn;
    if (this.phase !== 'ready' || !conn) return false;
    const gen = this.gen;
    // One ping in flight per child: a hung agent cannot pile up unanswered requests.
    if (!this.ping || this.ping.gen !== gen) {
      const answer = conn.agent.request<unknown, Record<string, never>>(PING_METHOD, {}).then(
        () => true,
        // Any JSON-RPC error object came from the agent (method not found is the expected answer);
        // a local error means the connection is gone.
        (error) => error instanceof RequestError,
      );
      const entry = { gen, answer };
      this.ping = entry;
      void answer.finally(() => {
        if (this.ping === entry) this.ping = null;
      });
    }
    const answered = await withTimeout(this.ping.answer, timeoutMs, false);
    return answered && this.phase === 'ready' && this.gen === gen;
  }

  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.phase = 'closed';
    const error = new AcpClientError('closed', 'ACP client closed');
    if (this.respawnTimer) clearTimeout(this.respawnTimer);
    this.respawnTimer = null;
    for (const waiter of this.readyWaiters) waiter.reject(error);
    this.readyWaiters.clear();
    for (const lane of this.lanes.values()) {
      for (const waiter of lane.waiters.splice(0)) waiter.fail(error);
    }
    this.conn?.close(error);
    this.conn = null;
    this.sessions.clear();
    const child = this.child;
    this.child = null;
    this.closing = child ? terminate(child) : Promise.resolve();
    return this.closing;
  }

  // ---- child lifecycle ------------------------------------------------------------------------------------

  private launch(): Promise<void> {
    const attempt = this.spawnAndInitialize();
    this.launching = attempt;
    void attempt.then(
      () => {
        if (this.launching === attempt) this.launching = null;
      },
      () => {
        if (this.launching === attempt) this.launching = null;
      },
    );
    return attempt;
  }

  private async spawnAndInitialize(): Promise<void> {
    const gen = ++this.gen;
    this.phase = 'starting';
    this.stats.spawns++;
    this.stderrTail.length = 0;
    const [file, ...args] = this.options.command as [string, ...string[]];
    let child: ChildProcess;
    try {
      child = spawn(file, args, {
        cwd: existsSync(this.options.cwd) ? this.options.cwd : process.cwd(),
        env: childEnv(this.options.env),
        stdio: ['pipe', 'pipe', 'pipe'],
        // Its own process group, so close() also reaches grandchildren (npx wrappers and the like).
        detached: process.platform !== 'win32',
      });
    } catch (error) {
      const failure = new AcpClientError('init_failed', `cannot spawn agent: ${(error as Error).message}`, {
        cause: error,
      });
      this.childGone(gen, failure);
      throw failure;
    }
    this.child = child;
    this.log.info({ pid: child.pid, command: this.options.command, gen }, 'agent runtime spawned');
    child.once('error', (error) => this.childGone(gen, error));
    child.once('exit', (code, signal) =>
      this.childGone(gen, new Error(`agent exited (code ${code ?? 'none'}, signal ${signal ?? 'none'})`)),
    );
    child.stdin!.on('error', () => {}); // EPIPE after a crash; the exit/close paths handle it
    this.pipeStderr(child);

    const app = acpClient({ name: 'deskbot-bridge' })
      .onNotification(methods.client.session.update, ({ params }) => this.onSessionUpdate(params))
      .onRequest(methods.client.session.requestPermission, ({ params }) => refusePermission(params, this.log))
      .onRequest('*', ({ method }) => {
        // fs/*, terminal/*, elicitation and extensions: we advertise none of them.
        this.log.debug({ method }, 'refusing an agent request the bridge does not offer');
        throw RequestError.methodNotFound(method);
      });
    const conn = app.connect(
      ndJsonStream(
        Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
        Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
      ),
    );
    this.conn = conn;
    void conn.closed.then(() =>
      this.childGone(gen, conn.signal.reason ?? new Error('ACP connection closed')),
    );

    try {
      const init = await withDeadline(
        conn.agent.request(methods.agent.initialize, {
          protocolVersion: PROTOCOL_VERSION,
          clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
          clientInfo: { name: 'deskbot-bridge', version: VERSION },
        }),
        this.initializeTimeoutMs,
        () =>
          new AcpClientError(
            'init_failed',
            `agent did not answer initialize within ${this.initializeTimeoutMs} ms`,
          ),
      );
      const phase = this.phase as Phase; // changed by other callbacks while we awaited
      if (this.gen !== gen || phase !== 'starting') {
        throw phase === 'closed'
          ? new AcpClientError('closed', 'ACP client closed during start')
          : new AcpClientError('init_failed', 'agent went away during initialize');
      }
      if (init.protocolVersion !== PROTOCOL_VERSION) {
        throw new AcpClientError(
          'init_failed',
          `agent speaks ACP protocol ${init.protocolVersion}, this bridge speaks ${PROTOCOL_VERSION}`,
        );
      }
      this.agentCaps = init.agentCapabilities;
      this.phase = 'ready';
      this.readyAt = Date.now();
      this.log.info({ pid: child.pid, gen, agent: init.agentInfo?.name }, 'agent runtime ready');
      for (const waiter of this.readyWaiters) waiter.resolve({ conn, gen });
      this.readyWaiters.clear();
    } catch (error) {
      const failure =
        error instanceof AcpClientError && error.code !== 'agent_crashed'
          ? error
          : new AcpClientError('init_failed', `agent initialize failed: ${(error as Error).message}`, {
              cause: error,
              rpcCode: error instanceof RequestError ? error.code : undefined,
            });
      this.childGone(gen, failure);
      throw failure;
    }
  }

  /** The child of generation `gen` is gone or unusable (exit, spawn error, broken stdio, failed initialize). */
  private childGone(gen: number, reason: unknown): void {
    if (gen !== this.gen || this.downGen === gen || this.phase === 'closed') return;
    this.downGen = gen;
    this.stats.crashes++;
    const now = Date.now();
    if (this.readyAt > 0 && this.phase === 'ready' && now - this.readyAt >= this.respawnCfg.resetAfterMs) {
      this.failures = 0;
    }
    this.failures++;
    const delay = Math.min(this.respawnCfg.maxMs, this.respawnCfg.baseMs * 2 ** (this.failures - 1));
    this.log.warn(
      {
        gen,
        reason: (reason as Error)?.message ?? String(reason),
        stderr: this.stderrTail.slice(),
        respawnInMs: delay,
      },
      'agent runtime down',
    );
    this.phase = 'backoff';
    this.readyAt = 0;
    this.conn?.close(
      new AcpClientError('agent_crashed', 'the agent runtime went away during this turn', { cause: reason }),
    );
    this.conn = null;
    this.sessions.clear();
    const child = this.child;
    this.child = null;
    if (child) void terminate(child);
    this.respawnTimer = setTimeout(() => {
      this.respawnTimer = null;
      if (this.phase === 'backoff') this.launch().catch(() => {});
    }, delay);
    this.respawnTimer.unref();
  }

  private pipeStderr(child: ChildProcess): void {
    let partial = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (data: string) => {
      const lines = (partial + data).split('\n');
      partial = lines.pop() ?? '';
      if (partial.length > 4000) partial = partial.slice(-4000);
      for (const raw of lines) {
        const line = raw.trimEnd().slice(0, 2000);
        if (!line) continue;
        this.stderrTail.push(line);
        if (this.stderrTail.length > STDERR_KEEP) this.stderrTail.shift();
        this.log.debug({ pid: child.pid, line }, 'agent stderr');
      }
    });
  }

  private waitReady(signal: AbortSignal): Promise<Ready> {
    if (this.phase === 'closed') return Promise.reject(new AcpClientError('closed', 'ACP client is closed'));
    if (this.phase === 'ready' && this.conn) return Promise.resolve({ conn: this.conn, gen: this.gen });
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<Ready>((resolve, reject) => {
      const onAbort = () => {
        this.readyWaiters.delete(waiter);
        reject(signal.reason);
      };
      const waiter = {
        resolve: (ready: Ready) => {
          signal.removeEventListener('abort', onAbort);
          resolve(ready);
        },
        reject: (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      this.readyWaiters.add(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  // ---- turns ------------------------------------------------------------------------------------------------

  private acquireLane(conversation: string, signal: AbortSignal): Promise<() => void> {
    let lane = this.lanes.get(conversation);
    if (!lane) {
      lane = { busy: false, waiters: [] };
      this.lanes.set(conversation, lane);
    }
    const current = lane;
    const release = () => {
      const next = current.waiters.shift();
      if (next) next.grant();
      else {
        current.busy = false;
        if (this.lanes.get(conversation) === current) this.lanes.delete(conversation);
      }
    };
    if (!current.busy) {
      current.busy = true;
      return Promise.resolve(release);
    }
    if (current.waiters.length >= this.maxQueued) {
      return Promise.reject(
        new AcpClientError(
          'busy',
          `conversation already has ${current.waiters.length + 1} turns running or queued`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const index = current.waiters.indexOf(waiter);
        if (index >= 0) current.waiters.splice(index, 1);
        reject(signal.reason);
      };
      const waiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
        fail: (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      current.waiters.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async runTurn(
    conversation: string,
    text: string,
    onChunk: ((text: string) => void) | undefined,
    signal: AbortSignal,
    hold: { until?: Promise<unknown> },
  ): Promise<PromptResult> {
    let retried = false;
    for (;;) {
      const { conn, gen } = await this.waitReady(signal);
      const entry = await this.sessionFor(conversation, conn, gen, signal);
      const outcome = await this.promptOnce(conversation, entry, conn, gen, text, onChunk, signal, hold);
      if (outcome !== 'session_not_found') return outcome;
      this.dropSession(conversation, entry, 'agent does not know the session', false);
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

  private async sessionFor(conversation: string, conn: ClientConnection, gen: number, signal: AbortSignal) {
    const now = Date.now();
    this.sweepIdle(conversation, now);
    let entry = this.sessions.get(conversation);
    if (entry && entry.gen !== gen) {
      this.sessions.delete(conversation);
      entry = undefined;
    }
    if (entry) {
      const reason = this.rotationReason(entry, now);
      if (!reason) {
        this.sessions.delete(conversation); // re-insert: most recently used last
        this.sessions.set(conversation, entry);
        return entry;
      }
      this.stats.rotations++;
      this.log.info(
        { conversation, sessionId: entry.sessionId, reason, turns: entry.turns },
        'rotating agent session',
      );
      this.dropSession(conversation, entry, reason, true);
    }
    const request = conn.agent.request(methods.agent.session.new, { cwd: this.options.cwd, mcpServers: [] });
    let created: { sessionId: string };
    try {
      created = await raceSignal(request, signal);
    } catch (error) {
      if (signal.aborted && error === signal.reason) {
        // The agent may still create it: close it when it does, so nothing leaks on its side.
        request.then(
          (late) => this.closeRemote(conn, gen, late.sessionId),
          () => {},
        );
      }
      throw this.classify(error, conn, gen);
    }
    const fresh: SessionEntry = {
      sessionId: created.sessionId,
      gen,
      createdAt: Date.now(),
      lastUsedAt: Date.now(),
      turns: 0,
    };
    this.sessions.set(conversation, fresh);
    this.stats.sessions++;
    this.log.debug({ conversation, sessionId: fresh.sessionId }, 'agent session created');
    this.evictOverflow(conversation);
    return fresh;
  }

  private async promptOnce(
    conversation: string,
    entry: SessionEntry,
    conn: ClientConnection,
    gen: number,
    text: string,
    onChunk: ((text: string) => void) | undefined,
    signal: AbortSignal,
    hold: { until?: Promise<unknown> },
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
    const request = conn.agent.request(methods.agent.session.prompt, {
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
        conn.agent.notify(methods.agent.session.cancel, { sessionId }).catch(() => {});
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
          if (!acknowledged) this.dropSession(conversation, entry, 'agent ignored session/cancel', true);
        });
        throw signal.reason;
      }
      forget();
      if (isSessionNotFound(error, sessionId) && this.gen === gen && !conn.signal.aborted)
        return 'session_not_found';
      throw this.classify(error, conn, gen);
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

  private classify(error: unknown, conn: ClientConnection, gen: number): AcpClientError {
    if (error instanceof AcpClientError) return error;
    if (this.phase === 'closed') return new AcpClientError('closed', 'ACP client closed', { cause: error });
    if (conn.signal.aborted || this.gen !== gen) {
      return new AcpClientError('agent_crashed', 'the agent runtime went away during this turn', {
        cause: error,
      });
    }
    if (error instanceof RequestError) {
      return new AcpClientError('agent_error', `agent error ${error.code}: ${error.message}`, {
        cause: error,
        rpcCode: error.code,
      });
    }
    return new AcpClientError(
      'agent_error',
      `agent call failed: ${(error as Error)?.message ?? String(error)}`,
      {
        cause: error,
      },
    );
  }

  // ---- session cache ----------------------------------------------------------------------------------------

  private rotationReason(entry: SessionEntry, now: number): string | null {
    const { idleMs, maxTurns, maxAgeMs } = this.options.rotation;
    if (now - entry.lastUsedAt > idleMs) return 'idle';
    if (entry.turns >= maxTurns) return 'turns';
    if (now - entry.createdAt > maxAgeMs) return 'age';
    return null;
  }

  /** Idle sessions of other conversations are dropped too (not counted as rotations) so the cache and the
   *  agent's own memory do not keep conversations nobody is having. */
  private sweepIdle(except: string, now: number): void {
    for (const [conversation, entry] of this.sessions) {
      if (conversation === except || this.lanes.get(conversation)?.busy) continue;
      if (now - entry.lastUsedAt > this.options.rotation.idleMs)
        this.dropSession(conversation, entry, 'idle', true);
    }
  }

  private evictOverflow(keep: string): void {
    while (this.sessions.size > this.maxSessions) {
      let victim: string | undefined;
      for (const conversation of this.sessions.keys()) {
        if (conversation === keep) continue;
        if (!this.lanes.get(conversation)?.busy) {
          victim = conversation;
          break;
        }
        victim ??= conversation;
      }
      if (victim === undefined) return;
      const entry = this.sessions.get(victim)!;
      this.log.debug(
        { conversation: victim, sessionId: entry.sessionId },
        'session cache full; evicting LRU',
      );
      this.dropSession(victim, entry, 'evicted', true);
    }
  }

  private dropSession(
    conversation: string,
    entry: SessionEntry,
    reason: string,
    closeOnAgent: boolean,
  ): void {
    if (this.sessions.get(conversation) === entry) this.sessions.delete(conversation);
    if (closeOnAgent && this.conn && this.phase === 'ready')
      this.closeRemote(this.conn, entry.gen, entry.sessionId);
    this.log.debug({ conversation, sessionId: entry.sessionId, reason }, 'agent session dropped');
  }

  /** session/close (stable ACP v1, only when the agent advertises it) so the agent can free the session. */
  private closeRemote(conn: ClientConnection, gen: number, sessionId: string): void {
    if (gen !== this.gen || conn !== this.conn || !this.agentCaps?.sessionCapabilities?.close) return;
    conn.agent.request(methods.agent.session.close, { sessionId }).catch(() => {});
  }
}

// ---- helpers ------------------------------------------------------------------------------------------------

function childEnv(overlay: Record<string, string | undefined> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of Object.entries(overlay ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return env;
}

/** The rule: JSON-RPC -32002 (Resource not found) naming our session in data.sessionId, or naming no session
 *  at all; or any error whose message/data says the session is unknown (agents that predate the SDK helper). */
export function isSessionNotFound(error: unknown, sessionId: string): boolean {
  if (!(error instanceof RequestError)) return false;
  const data = error.data as { sessionId?: unknown } | undefined;
  if (error.code === RESOURCE_NOT_FOUND) {
    return typeof data?.sessionId !== 'string' || data.sessionId === sessionId;
  }
  let details = error.message;
  try {
    details += ` ${JSON.stringify(error.data ?? '')}`;
  } catch {
    // unserialisable data: the message alone decides
  }
  return /session[^.]{0,40}not\s+found|unknown\s+session|no\s+such\s+session/i.test(details);
}

function refusePermission(
  params: { options: Array<{ optionId: string; kind: string }> },
  log: Logger,
): RequestPermissionResponse {
  // The bridge is unattended: nobody can grant anything. Pick the agent's own "reject" option when it offers
  // one; otherwise answer "cancelled", the only other outcome ACP defines.
  const reject =
    params.options.find((option) => option.kind === 'reject_once') ??
    params.options.find((option) => option.kind === 'reject_always');
  log.info({ option: reject?.optionId ?? null }, 'agent asked for permission; refused');
  return reject
    ? { outcome: { outcome: 'selected', optionId: reject.optionId } }
    : { outcome: { outcome: 'cancelled' } };
}

function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  return new Promise<T>((resolve) => {
    const timer = setTimeout(() => resolve(fallback), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      () => {
        clearTimeout(timer);
        resolve(fallback);
      },
    );
  });
}

function withDeadline<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function signalChild(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    if (process.platform !== 'win32') process.kill(-child.pid, signal);
    else child.kill(signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

/** Closes stdin, sends SIGTERM to the child's process group, SIGKILL after a grace; resolves once it exited. */
async function terminate(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || exited(child)) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  signalChild(child, 'SIGTERM');
  const timer = setTimeout(() => signalChild(child, 'SIGKILL'), KILL_GRACE_MS);
  await gone;
  clearTimeout(timer);
  // The group may hold grandchildren that outlive their parent; they get no grace.
  signalChild(child, 'SIGKILL');
}
