// Server-sent events for the dashboard mirror (SPEC "Events" 3). Frames are `event: <name>\ndata: <json>\n\n`,
// a `: ping` comment every 15 s keeps proxies from closing an idle stream, and each client may have at most
// `maxBufferedBytes` waiting in its socket: a client that falls further behind is dropped (it reconnects
// and gets a fresh snapshot) instead of being buffered forever. At most `maxClients` streams at once, and
// `maxPerAddress` from one address: there a new stream closes that address's oldest, because a reloading
// page opens a new stream before the old one's close is noticed (16 reloads once locked the dashboard out).
import type { Clock } from '../../audio/pacer.js';
import { DEFAULT_LIMITS } from '../../config/schema.js';
import { type Logger, silentLogger } from '../../util/log.js';

/** The part of a Node ServerResponse the hub uses (a fastify `reply.raw`). */
export interface SseStream {
  writeHead(status: number, headers: Record<string, string>): unknown;
  write(chunk: string): boolean;
  end(chunk?: string): unknown;
  on(event: 'close' | 'drain', listener: () => void): unknown;
  destroy?(): unknown;
  readonly destroyed?: boolean;
  readonly writableEnded?: boolean;
  /** Bytes queued in the stream (Node's writable.writableLength). */
  readonly writableLength?: number;
}

/** A fastify reply: the hub hijacks it and writes to `raw`. */
export interface SseReply {
  raw: SseStream;
  hijack(): unknown;
}

export interface SseEvent {
  event: string;
  data: unknown;
}

export interface SseHubOptions {
  /** Heartbeat timer source (default: setTimeout, unref'd). */
  clock?: Clock;
  /** Default 15 000. */
  heartbeatMs?: number;
  /** Concurrent streams (default 16); the next one gets 503 `too_many_clients`. */
  maxClients?: number;
  /** Streams per remote address; a new one closes the oldest of that address (default `limits.sse_max_streams_per_address`). */
  maxPerAddress?: number;
  /** A client with more than this many bytes not yet flushed is dropped (default 256 KiB). */
  maxBufferedBytes?: number;
  /** `retry:` hint sent first, ms (default 3000). */
  retryMs?: number;
  /** Events written to each new client right after the headers (for example a state snapshot). */
  welcome?: () => SseEvent[];
  logger?: Logger;
}

export interface SseStats {
  clients: number;
  attached: number;
  refused: number;
  /** Clients dropped because they fell behind. */
  droppedSlow: number;
  /** Streams closed to make room for a newer one from the same address. */
  evicted: number;
  events: number;
}

interface Client {
  id: number;
  stream: SseStream;
  address: string;
  /** Bytes written since the stream last reported backpressure cleared (our own count when it has none). */
  pending: number;
  blocked: boolean;
}

const defaultTimers: Clock = {
  now: () => Date.now(),
  setTimer: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    timer.unref?.();
    return timer;
  },
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** One SSE frame. Event names lose any CR/LF; data is one JSON line (JSON never contains a raw newline). */
export function formatSseEvent(event: string, data: unknown): string {
  const name = event.replace(/[\r\n]+/g, ' ').trim() || 'message';
  return `event: ${name}\ndata: ${JSON.stringify(data ?? null)}\n\n`;
}

export class SseHub {
  private readonly clients = new Map<number, Client>();
  private readonly clock: Clock;
  private readonly heartbeatMs: number;
  private readonly maxClients: number;
  private readonly maxPerAddress: number;
  private readonly maxBuffered: number;
  private readonly logger: Logger;
  private heartbeat: unknown = null;
  private nextId = 0;
  private closed = false;
  private readonly counters = { attached: 0, refused: 0, droppedSlow: 0, evicted: 0, events: 0 };

  constructor(private readonly options: SseHubOptions = {}) {
    this.clock = options.clock ?? defaultTimers;
    this.heartbeatMs = options.heartbeatMs ?? 15_000;
    this.maxClients = options.maxClients ?? 16;
    this.maxPerAddress = options.maxPerAddress ?? DEFAULT_LIMITS.sse_max_streams_per_address;
    this.maxBuffered = options.maxBufferedBytes ?? 256 * 1024;
    this.logger = options.logger ?? silentLogger;
  }

  /**
   * Starts a stream on a fastify reply (hijacked here) or a raw response. Returns a function that closes
   * this client, or null when refused (hub full or closed: 503 in the DESIGN §2 error shape). `address` is
   * the peer's; its oldest stream is closed first when it already has `maxPerAddress`.
   */
  attach(target: SseReply | SseStream, address = ''): (() => void) | null {
    let stream: SseStream;
    if ('raw' in target && typeof (target as SseReply).hijack === 'function') {
      (target as SseReply).hijack();
      stream = (target as SseReply).raw;
    } else {
      stream = target as SseStream;
    }
    this.evictOldest(address);
    if (this.closed || this.clients.size >= this.maxClients) {
      this.counters.refused++;
      stream.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '5' });
      stream.end(
        JSON.stringify({
          error: { code: 'too_many_clients', message: 'too many event-stream clients; try again later' },
        }),
      );
      return null;
    }
    const client: Client = { id: ++this.nextId, stream, address, pending: 0, blocked: false };
    this.clients.set(client.id, client);
    this.counters.attached++;
    stream.on('close', () => this.remove(client));
    stream.on('drain', () => {
      client.blocked = false;
      client.pending = 0;
    });
    stream.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    this.write(client, `retry: ${this.options.retryMs ?? 3000}\n\n`);
    for (const event of this.welcomeEvents()) {
      if (!this.clients.has(client.id)) break;
      this.write(client, formatSseEvent(event.event, event.data));
    }
    this.armHeartbeat();
    return () => this.drop(client, false);
  }

  /** Writes one event to every client; returns how many it reached. Never throws. */
  send(event: string, data: unknown): number {
    let frame: string;
    try {
      frame = formatSseEvent(event, data);
    } catch (error) {
      this.logger.debug({ event, err: (error as Error).message }, 'event not serialisable; not streamed');
      return 0;
    }
    this.counters.events++;
    let reached = 0;
    for (const client of [...this.clients.values()]) {
      if (this.write(client, frame)) reached++;
    }
    return reached;
  }

  get clientCount(): number {
    return this.clients.size;
  }

  stats(): SseStats {
    return { clients: this.clients.size, ...this.counters };
  }

  /** Ends every stream, stops the heartbeat and refuses new clients. */
  close(): void {
    this.closed = true;
    for (const client of [...this.clients.values()]) this.drop(client, false);
    this.disarmHeartbeat();
  }

  /** Makes room for one more stream from `address` by closing its oldest (Map order is attach order). */
  private evictOldest(address: string): void {
    const mine = [...this.clients.values()].filter((client) => client.address === address);
    for (const client of mine.slice(0, Math.max(0, mine.length - this.maxPerAddress + 1))) {
      this.counters.evicted++;
      this.logger.info(
        { client: client.id, address },
        'event stream replaced by a newer one from its address',
      );
      this.drop(client, false);
    }
  }

  private welcomeEvents(): SseEvent[] {
    try {
      return this.options.welcome?.() ?? [];
    } catch (error) {
      this.logger.warn({ err: (error as Error).message }, 'event-stream welcome failed');
      return [];
    }
  }

  /** Writes a frame unless the client is too far behind (then it is dropped). True when written. */
  private write(client: Client, chunk: string): boolean {
    const { stream } = client;
    if (stream.destroyed || stream.writableEnded) {
      this.remove(client);
      return false;
    }
    const buffered = Math.max(client.pending, stream.writableLength ?? 0);
    const bytes = Buffer.byteLength(chunk);
    if (buffered > 0 && buffered + bytes > this.maxBuffered) {
      this.counters.droppedSlow++;
      this.logger.info({ client: client.id, buffered }, 'event-stream client too slow; dropped');
      this.drop(client, true);
      return false;
    }
    try {
      const flushed = stream.write(chunk);
      if (!flushed || client.blocked) {
        client.blocked = true;
        client.pending += bytes;
      }
      return true;
    } catch {
      this.drop(client, true);
      return false;
    }
  }

  private drop(client: Client, destroy: boolean): void {
    if (!this.remove(client)) return;
    try {
      if (destroy && client.stream.destroy) client.stream.destroy();
      else client.stream.end();
    } catch {
      // already gone
    }
  }

  private remove(client: Client): boolean {
    const had = this.clients.delete(client.id);
    if (this.clients.size === 0) this.disarmHeartbeat();
    return had;
  }

  private armHeartbeat(): void {
    if (this.heartbeat !== null || this.clients.size === 0) return;
    this.heartbeat = this.clock.setTimer(() => {
      this.heartbeat = null;
      for (const client of [...this.clients.values()]) this.write(client, ': ping\n\n');
      this.armHeartbeat();
    }, this.heartbeatMs);
  }

  private disarmHeartbeat(): void {
    if (this.heartbeat === null) return;
    this.clock.clearTimer(this.heartbeat);
    this.heartbeat = null;
  }
}
