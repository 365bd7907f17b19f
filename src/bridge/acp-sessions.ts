// Per-conversation state of the ACP client: the cached agent session with its rotation rules (DESIGN §3),
// and the queue that lets one turn at a time run on it.
import type { Logger } from '../util/log.js';
import { abortableWait, type Waiter } from './acp-async.js';
import type { AcpClientStats } from './acp-client.js';
import { AcpClientError } from './acp-errors.js';

export interface SessionEntry {
  sessionId: string;
  /** The runtime generation that created it; a session never outlives its child. */
  gen: number;
  createdAt: number;
  lastUsedAt: number;
  turns: number;
}

export interface SessionCacheOptions {
  rotation: { idleMs: number; maxTurns: number; maxAgeMs: number };
  maxSessions: number;
  /** Shared with the client; the cache counts sessions created and rotations. */
  stats: AcpClientStats;
  logger: Logger;
  /** A conversation with a turn running or queued keeps its session through sweeps and evictions. */
  isBusy: (conversation: string) => boolean;
  /** Lets the agent free a session we drop. */
  closeOnAgent: (entry: SessionEntry) => void;
}

/** Conversation → session, least recently used first (Map insertion order). */
export class SessionCache {
  private readonly entries = new Map<string, SessionEntry>();
  private readonly log: Logger;

  constructor(private readonly options: SessionCacheOptions) {
    this.log = options.logger;
  }

  get size(): number {
    return this.entries.size;
  }

  clear(): void {
    this.entries.clear();
  }

  /** The conversation's session if it may serve another turn on generation `gen`; a session that is due for
   *  rotation is dropped instead, and the caller creates a fresh one. */
  reuse(conversation: string, gen: number): SessionEntry | undefined {
    const now = Date.now();
    this.sweepIdle(conversation, now);
    const entry = this.entries.get(conversation);
    if (!entry) return undefined;
    if (entry.gen !== gen) {
      this.entries.delete(conversation);
      return undefined;
    }
    const reason = this.rotationReason(entry, now);
    if (!reason) {
      this.entries.delete(conversation); // re-insert: most recently used last
      this.entries.set(conversation, entry);
      return entry;
    }
    this.options.stats.rotations++;
    this.log.info(
      { conversation, sessionId: entry.sessionId, reason, turns: entry.turns },
      'rotating agent session',
    );
    this.drop(conversation, entry, reason, true);
    return undefined;
  }

  /** Caches a session the agent just created, evicting beyond the limit. */
  add(conversation: string, sessionId: string, gen: number): SessionEntry {
    const now = Date.now();
    const entry: SessionEntry = { sessionId, gen, createdAt: now, lastUsedAt: now, turns: 0 };
    this.entries.set(conversation, entry);
    this.options.stats.sessions++;
    this.log.debug({ conversation, sessionId }, 'agent session created');
    this.evictOverflow(conversation);
    return entry;
  }

  /** Forgets `entry` if it is still the conversation's session; closeOnAgent when the agent may still hold it. */
  drop(conversation: string, entry: SessionEntry, reason: string, closeOnAgent: boolean): void {
    if (this.entries.get(conversation) === entry) this.entries.delete(conversation);
    if (closeOnAgent) this.options.closeOnAgent(entry);
    this.log.debug({ conversation, sessionId: entry.sessionId, reason }, 'agent session dropped');
  }

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
    for (const [conversation, entry] of this.entries) {
      if (conversation === except || this.options.isBusy(conversation)) continue;
      if (now - entry.lastUsedAt > this.options.rotation.idleMs) this.drop(conversation, entry, 'idle', true);
    }
  }

  /** Before a new session is created for `keep`: evicts idle conversations until one more fits, so the
   *  session/close of the victim reaches the agent before our session/new and the agent (which has its own
   *  limit and evicts on its own, running turns included) never overflows. */
  makeRoom(keep: string): void {
    this.evictOverflow(keep, this.options.maxSessions - 1);
  }

  /** Evicts least recently used idle conversations until at most `limit` remain. A conversation with a turn
   *  running or queued is never evicted: its turn would fail with session_not_found. The client admits at
   *  most maxSessions busy conversations, so idle victims exist whenever the cache is over its limit. */
  private evictOverflow(keep: string, limit = this.options.maxSessions): void {
    while (this.entries.size > limit) {
      let victim: string | undefined;
      for (const conversation of this.entries.keys()) {
        if (conversation !== keep && !this.options.isBusy(conversation)) {
          victim = conversation;
          break;
        }
      }
      if (victim === undefined) {
        this.log.warn(
          { sessions: this.entries.size, limit },
          'session cache over its limit and every conversation is busy; keeping them all',
        );
        return;
      }
      const entry = this.entries.get(victim)!;
      this.log.debug(
        { conversation: victim, sessionId: entry.sessionId },
        'session cache full; evicting LRU',
      );
      this.drop(victim, entry, 'evicted', true);
    }
  }
}

interface Lane {
  busy: boolean;
  waiters: Array<Waiter<() => void>>;
}

/** One turn at a time per conversation, a bounded queue behind it. */
export class TurnQueue {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly maxQueued: number) {}

  isBusy(conversation: string): boolean {
    return this.lanes.get(conversation)?.busy ?? false;
  }

  /** Conversations with a turn running or queued (a lane exists only while it is held). */
  get busyConversations(): number {
    return this.lanes.size;
  }

  /** Resolves with the release function once it is this turn's go; rejects with 'busy' when the queue is
   *  full, or with the signal's reason if it aborts while queued. */
  acquire(conversation: string, signal: AbortSignal): Promise<() => void> {
    let lane = this.lanes.get(conversation);
    if (!lane) {
      lane = { busy: false, waiters: [] };
      this.lanes.set(conversation, lane);
    }
    const current = lane;
    const release = () => {
      const next = current.waiters.shift();
      if (next) next.resolve(release);
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
    return abortableWait<() => void>(
      signal,
      (waiter) => current.waiters.push(waiter),
      (waiter) => {
        const index = current.waiters.indexOf(waiter);
        if (index >= 0) current.waiters.splice(index, 1);
      },
    );
  }

  /** Fails every queued turn; the running ones end on their own. */
  failAll(error: unknown): void {
    for (const lane of this.lanes.values()) {
      for (const waiter of lane.waiters.splice(0)) waiter.reject(error);
    }
  }
}
