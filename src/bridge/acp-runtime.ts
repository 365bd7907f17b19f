// The long-lived agent runtime behind the ACP client: one child at a time, each a numbered generation. A
// generation is spawned, connected and initialized; when it dies (exit, spawn error, broken stdio, failed
// initialize) the next one is spawned after a backoff, until close(). Callers wait for readiness and learn
// whether a failed call was the agent's own answer or the runtime going away underneath it.
import type { ChildProcess } from 'node:child_process';
import {
  type ClientConnection,
  type InitializeResponse,
  methods,
  PROTOCOL_VERSION,
  RequestError,
  type SessionNotification,
} from '@agentclientprotocol/sdk';
import type { Logger } from '../util/log.js';
import { VERSION } from '../version.js';
import { abortableWait, type Waiter, withDeadline, withTimeout } from './acp-async.js';
import { type AgentCommand, RespawnBackoff, StderrTail, spawnAgentChild, terminate } from './acp-child.js';
import type { AcpClientStats } from './acp-client.js';
import { connectToAgent } from './acp-connection.js';
import { AcpClientError } from './acp-errors.js';

/** A usable connection and the generation it belongs to; stale once the runtime has moved on. */
export interface Ready {
  conn: ClientConnection;
  gen: number;
}

type Phase = 'new' | 'starting' | 'ready' | 'backoff' | 'closed';

/** A request the agent cannot know; any answer (normally -32601) proves its JSON-RPC loop is alive. */
const PING_METHOD = '_deskbot/ping';

export interface AgentRuntimeOptions extends AgentCommand {
  logger: Logger;
  initializeTimeoutMs: number;
  respawn: { baseMs: number; maxMs: number; resetAfterMs: number };
  /** Shared with the client; the runtime counts spawns and crashes. */
  stats: AcpClientStats;
  onSessionUpdate: (notification: SessionNotification) => void;
  /** A generation went down; every session it held went with it. */
  onDown: () => void;
}

export class AgentRuntime {
  private readonly log: Logger;
  private readonly backoff: RespawnBackoff;
  private phase: Phase = 'new';
  private gen = 0;
  private downGen = 0;
  private child: ChildProcess | null = null;
  private conn: ClientConnection | null = null;
  private agentCaps: InitializeResponse['agentCapabilities'] = undefined;
  private respawnTimer: NodeJS.Timeout | null = null;
  private launching: Promise<void> | null = null;
  private readonly readyWaiters = new Set<Waiter<Ready>>();
  /** Waiters that give up when the launch they wait for fails, instead of waiting through the backoff. */
  private readonly launchWaiters = new Set<Waiter<Ready>>();
  private lastDown = '';
  private readonly stderrTail = new StderrTail();
  private ping: { gen: number; answer: Promise<boolean> } | null = null;

  constructor(private readonly options: AgentRuntimeOptions) {
    this.log = options.logger;
    this.backoff = new RespawnBackoff(options.respawn);
  }

  get closed(): boolean {
    return this.phase === 'closed';
  }

  /** The running child's process id; undefined between children. */
  get pid(): number | undefined {
    return this.child?.pid;
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
          this.options.respawn.maxMs + this.options.initializeTimeoutMs,
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

  /** Starts the first child if nothing has started one yet; failures retry in the background. */
  startLazily(): void {
    if (this.phase === 'new') this.launch().catch(() => {});
  }

  /** Resolves with the ready connection. With `failWhenDown`, a runtime that is down (backing off after a
   *  crash) rejects at once with 'unavailable', and so does a launch that fails while we wait for it. */
  waitReady(signal: AbortSignal, failWhenDown = false): Promise<Ready> {
    if (this.phase === 'closed') return Promise.reject(new AcpClientError('closed', 'ACP client is closed'));
    if (this.phase === 'ready' && this.conn) return Promise.resolve({ conn: this.conn, gen: this.gen });
    if (signal.aborted) return Promise.reject(signal.reason);
    if (failWhenDown && this.phase === 'backoff') return Promise.reject(this.unavailable());
    const waiters = failWhenDown ? this.launchWaiters : this.readyWaiters;
    return abortableWait<Ready>(
      signal,
      (waiter) => waiters.add(waiter),
      (waiter) => waiters.delete(waiter),
    );
  }

  /** The 'unavailable' error while the runtime is down (its last child died, the next is not started yet). */
  downError(): AcpClientError | undefined {
    return this.phase === 'backoff' ? this.unavailable() : undefined;
  }

  private unavailable(): AcpClientError {
    return new AcpClientError('unavailable', `the agent runtime is down (${this.lastDown || 'not started'})`);
  }

  /** True only when the child is up, initialized and answers a round trip within timeoutMs. */
  async health(timeoutMs: number): Promise<boolean> {
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

  /** Whether `ready` still names the current, connected generation. */
  isLive(ready: Ready): boolean {
    return ready.gen === this.gen && !ready.conn.signal.aborted;
  }

  /** What a failed call made on `ready` means for the caller. */
  classify(error: unknown, ready: Ready): AcpClientError {
    if (error instanceof AcpClientError) return error;
    if (this.phase === 'closed') return new AcpClientError('closed', 'ACP client closed', { cause: error });
    if (!this.isLive(ready)) return wentAway(error);
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

  /** session/close (stable ACP v1, only when the agent advertises it) so the agent can free the session.
   *  A session of an earlier generation died with its child: nothing to close. */
  closeSession(gen: number, sessionId: string): void {
    const conn = this.conn;
    if (this.phase !== 'ready' || !conn || gen !== this.gen || !this.agentCaps?.sessionCapabilities?.close)
      return;
    conn.agent.request(methods.agent.session.close, { sessionId }).catch(() => {});
  }

  /** Stops respawning, fails everyone waiting for readiness and terminates the child's process group. */
  close(error: AcpClientError): Promise<void> {
    this.phase = 'closed';
    if (this.respawnTimer) clearTimeout(this.respawnTimer);
    this.respawnTimer = null;
    for (const waiter of [...this.readyWaiters, ...this.launchWaiters]) waiter.reject(error);
    this.readyWaiters.clear();
    this.launchWaiters.clear();
    this.conn?.close(error);
    this.conn = null;
    const child = this.child;
    this.child = null;
    return child ? terminate(child) : Promise.resolve();
  }

  private launch(): Promise<void> {
    const attempt = this.spawnAndInitialize();
    this.launching = attempt;
    const settled = () => {
      if (this.launching === attempt) this.launching = null;
    };
    void attempt.then(settled, settled);
    return attempt;
  }

  private async spawnAndInitialize(): Promise<void> {
    const gen = ++this.gen;
    this.phase = 'starting';
    this.options.stats.spawns++;
    this.stderrTail.reset();
    let child: ChildProcess;
    try {
      child = spawnAgentChild(this.options);
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
    this.stderrTail.follow(child, this.log);

    const conn = connectToAgent(child, this.log, this.options.onSessionUpdate);
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
        this.options.initializeTimeoutMs,
        () =>
          new AcpClientError(
            'init_failed',
            `agent did not answer initialize within ${this.options.initializeTimeoutMs} ms`,
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
      this.backoff.up();
      this.log.info({ pid: child.pid, gen, agent: init.agentInfo?.name }, 'agent runtime ready');
      for (const waiter of [...this.readyWaiters, ...this.launchWaiters]) waiter.resolve({ conn, gen });
      this.readyWaiters.clear();
      this.launchWaiters.clear();
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

  /** The child of generation `gen` is gone or unusable; reports of an older generation are stale, and a
   *  generation goes down once however many of exit, error and connection close report it. */
  private childGone(gen: number, reason: unknown): void {
    if (gen !== this.gen || this.downGen === gen || this.phase === 'closed') return;
    this.downGen = gen;
    this.options.stats.crashes++;
    const delay = this.backoff.down();
    this.lastDown = `${(reason as Error)?.message ?? String(reason)}; next start in ${delay} ms`;
    this.log.warn(
      {
        gen,
        reason: (reason as Error)?.message ?? String(reason),
        stderr: this.stderrTail.snapshot(),
        respawnInMs: delay,
      },
      'agent runtime down',
    );
    this.phase = 'backoff';
    this.conn?.close(wentAway(reason));
    this.conn = null;
    this.options.onDown();
    const failed = this.unavailable();
    for (const waiter of this.launchWaiters) waiter.reject(failed);
    this.launchWaiters.clear();
    const child = this.child;
    this.child = null;
    if (child) void terminate(child);
    this.respawnTimer = setTimeout(() => {
      this.respawnTimer = null;
      if (this.phase === 'backoff') this.launch().catch(() => {});
    }, delay);
    this.respawnTimer.unref();
  }
}

function wentAway(cause: unknown): AcpClientError {
  return new AcpClientError('agent_crashed', 'the agent runtime went away during this turn', { cause });
}
