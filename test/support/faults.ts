// Fault injection for the e2e fault suites: a logger that keeps its lines in memory, live-handle counts for
// leak checks, a raw HTTP server whose handler each test scripts (hangs, garbage streams, 500s), and a TCP
// proxy whose connections can be cut (a service "dying" mid-call). The voice server they drive: fault-voice.ts.
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import {
  type AddressInfo,
  connect,
  createServer as createTcpServer,
  Socket as NetSocket,
  type Socket,
} from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Logger } from '../../src/util/log.js';

// ---- logs --------------------------------------------------------------------------------------------------

export type LogEntry = { level: number; msg: string; err?: unknown; [key: string]: unknown };

/** A pino logger writing JSON lines into memory, so a test can assert that a clear reason was logged. */
export class LogCapture {
  readonly entries: LogEntry[] = [];
  readonly logger: Logger;

  constructor(level = 'info') {
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        for (const line of chunk.toString().split('\n').filter(Boolean)) {
          this.entries.push(JSON.parse(line) as LogEntry);
        }
        done();
      },
    });
    this.logger = pino({ level }, sink);
  }

  /** Entries logged from index `since` on whose message matches `msg` (and whose `err` matches `err`). */
  find(msg: string | RegExp, err?: RegExp, since = 0): LogEntry[] {
    return this.entries.slice(since).filter((entry) => {
      const msgOk = typeof msg === 'string' ? entry.msg === msg : msg.test(entry.msg);
      return msgOk && (!err || err.test(String(entry.err ?? '')));
    });
  }

  get mark(): number {
    return this.entries.length;
  }
}

// ---- live handles ------------------------------------------------------------------------------------------

/** Kinds that come and go with the file system and the event loop's own bookkeeping, not with our code. */
const TRANSIENT = new Set(['FSReqCallback', 'FSReqPromise', 'Immediate', 'TTYWrap', 'GetAddrInfoReqWrap']);

/**
 * Live resources keeping the event loop alive, by type (Timeout, TCPSocketWrap, ProcessWrap, ...). Sockets
 * accepted by the stand-ins for remote services (`remotePorts`: their listening ports) are left out: those
 * live in another process in production, and Node keeps a server socket whose client aborted mid-request
 * for a few seconds after its 'close'. Whether the client closed its request is checked on the stand-in.
 */
export function liveHandles(remotePorts: number[] = []): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) {
    if (!TRANSIENT.has(type)) counts[type] = (counts[type] ?? 0) + 1;
  }
  const remote = activeSockets().filter((socket) => remotePorts.includes(socket.localPort ?? -1)).length;
  if (remote > 0) counts.TCPSocketWrap = (counts.TCPSocketWrap ?? 0) - remote;
  return counts;
}

/** Listeners on `process` (signal handlers, exit hooks): a per-turn leak there grows without bound. */
export function processListeners(): number {
  return process.eventNames().reduce((sum, name) => sum + process.listenerCount(name), 0);
}

function activeSockets(): Socket[] {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter((h): h is Socket => h instanceof NetSocket);
}

/** Open TCP sockets as local → remote ports, to name the one a failed check is about. */
function describeSockets(): string {
  return activeSockets()
    .filter((s) => s.localPort !== undefined)
    .map((s) => `${s.localPort}→${s.remotePort}`)
    .join(', ');
}

export interface Baseline {
  handles: Record<string, number>;
  processListeners: number;
  remotePorts: number[];
}

/** Counts now; `remoteUrls` are the stand-ins for remote services (see liveHandles). */
export function baseline(remoteUrls: string[] = []): Baseline {
  const remotePorts = remoteUrls.map((url) => Number(new URL(url).port));
  return { handles: liveHandles(remotePorts), processListeners: processListeners(), remotePorts };
}

/** Polls until every handle count is back at or under the baseline; fails naming the kinds still over it. */
export async function backToBaseline(before: Baseline, timeoutMs = 8000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const over = Object.entries(liveHandles(before.remotePorts))
      .filter(([type, count]) => count > (before.handles[type] ?? 0))
      .map(([type, count]) => `${type} ${before.handles[type] ?? 0} → ${count}`);
    const listeners = processListeners();
    if (listeners > before.processListeners)
      over.push(`process listeners ${before.processListeners} → ${listeners}`);
    if (over.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`live handles above the baseline: ${over.join(', ')}; sockets ${describeSockets()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

// ---- requests -----------------------------------------------------------------------------------------------

/** One HTTP request on its own connection, closed after the answer: the test's own keep-alive connections
 *  would otherwise sit in the server's handle counts. */
export function requestOnce(
  url: string,
  { method = 'GET', json, timeoutMs = 60_000 }: { method?: string; json?: unknown; timeoutMs?: number } = {},
): Promise<{ status: number; text: string }> {
  const body = json === undefined ? undefined : JSON.stringify(json);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method,
        agent: false,
        timeout: timeoutMs,
        headers: { connection: 'close', ...(body ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

// ---- servers ------------------------------------------------------------------------------------------------

export type RawHandler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** An HTTP server whose behaviour the test sets per request: hang, stream garbage, fail. It counts the
 *  responses still open, so a test sees when the client closed a request it abandoned. */
export class RawServer {
  handler: RawHandler = (_req, res) => res.writeHead(404).end();
  readonly requests: Array<{ path: string; body: string }> = [];
  private readonly open = new Set<ServerResponse>();
  private server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        this.requests.push({ path: req.url ?? '', body });
        this.open.add(res);
        res.on('close', () => this.open.delete(res));
        this.handler(req, res, body);
      });
    });
    // Idle keep-alive sockets would sit in the handle counts for the whole suite.
    this.server.keepAliveTimeout = 1;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
    return this;
  }

  /** Responses not yet finished or closed by the client. */
  get openResponses(): number {
    return this.open.size;
  }

  async close(): Promise<void> {
    for (const res of this.open) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

/** Handlers for RawServer. */
export const raw = {
  /** Accepts the request and never answers (no timer: nothing of ours lingers once the client gives up). */
  hang: (): RawHandler => () => {},
  status:
    (status: number, body = '{"error":{"message":"scripted failure"}}'): RawHandler =>
    (_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
      res.end(body);
    },
  /** A 200 event stream made of the given lines, then the end of the response. */
  sse:
    (lines: string[]): RawHandler =>
    (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', connection: 'close' });
      res.end(lines.map((line) => `${line}\n`).join(''));
    },
  /** A 200 that is not an event stream at all (a captive portal, a proxy's error page). */
  html: (): RawHandler => (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', connection: 'close' });
    res.end('<html><body><h1>Gateway</h1><p>Please log in.</p></body></html>\n');
  },
};

/** A TCP proxy in front of a service; `cut()` drops every connection through it (the service "dies" for its
 *  callers mid-call), `refuse` makes it drop new ones at once. */
export class TcpProxy {
  refuse = false;
  private readonly sockets = new Set<Socket>();
  private readonly server = createTcpServer((client) => this.accept(client));
  url = '';

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  get connections(): number {
    return this.sockets.size;
  }

  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.refuse) {
      client.destroy();
      return;
    }
    const upstream = connect(this.target.port, this.target.host);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
