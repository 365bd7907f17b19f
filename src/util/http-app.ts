// A fastify instance with the DESIGN §2 error shape on every failure path, shared by voice server and bridge.
import { type Server, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import { DEFAULT_LIMITS, type Limits } from '../config/schema.js';
import { errorBody, toHttpError } from './http-error.js';
import type { Logger } from './log.js';

export interface HttpAppOptions {
  logger: Logger;
  /** Bytes; larger bodies get 413 in the error shape. */
  bodyLimit?: number;
  /** Connection caps and timeouts (`limits.http_*`); missing keys take the schema defaults. */
  limits?: Partial<Limits>;
  /** Told of every limit hit (connection refused, request timed out), for a metric. */
  onLimit?: (limit: LimitName) => void;
}

/** What a connection-level limit is called in logs and in `deskbot_voice_limit_refusals_total{limit}`. */
export type LimitName =
  | `${'ws' | 'http'}_${ConnectionCap}`
  | 'request_timeout'
  | 'hello_timeout'
  | 'mcp_tools'
  | 'mcp_tool_bytes';

export type ConnectionCap = 'connections' | 'connections_per_address';

export interface ConnectionCaps {
  maxConnections: number;
  maxPerAddress: number;
  /** An over-cap connection that sends no request in this long is destroyed (its fd is what we protect). */
  graceMs: number;
  onLimit?: (cap: ConnectionCap) => void;
}

/** Which cap a connection broke, if any; read when its request (or upgrade) arrives. */
export type ConnectionVerdict = (socket: Socket) => ConnectionCap | undefined;

export function createHttpApp(options: HttpAppOptions): FastifyInstance {
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const onLimit = options.onLimit;
  const app = Fastify({
    loggerInstance: options.logger as unknown as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? 256 * 1024,
    // Routes with and without a trailing slash are the same route (the firmware calls /device/ota/).
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    return503OnClosing: true,
    forceCloseConnections: true,
    // A URL the router cannot even decode (`%E0%A4%A`, an over-long parameter) never reaches the error
    // handler; without this fastify answers in its own shape.
    frameworkErrors: sendError,
    // Requests node's HTTP parser refuses (header block over 16 KiB, a broken request line) never become
    // fastify requests either; the answer is written on the socket, in the same shape.
    clientErrorHandler: (error, socket) => {
      if ((error as { code?: string }).code === 'ERR_HTTP_REQUEST_TIMEOUT') onLimit?.('request_timeout');
      writeClientError(error, socket);
    },
  });
  applyHttpTimeouts(app.server, limits);
  const verdict = guardConnections(app.server, {
    maxConnections: limits.http_max_connections,
    maxPerAddress: limits.http_max_connections_per_address,
    graceMs: limits.over_limit_grace_ms,
    onLimit: (cap) => onLimit?.(`http_${cap}`),
  });
  // First hook of every route: a connection over a cap gets its one answer and is closed.
  app.addHook('onRequest', (request, reply, done) => {
    const broken = verdict(request.raw.socket);
    if (!broken) return done();
    void reply
      .status(503)
      .header('connection', 'close')
      .header('retry-after', '5')
      .send(errorBody('too_many_connections', connectionsMessage(broken)));
  });
  app.setErrorHandler(sendError);
  app.setNotFoundHandler((request, reply) => {
    void reply
      .status(404)
      .send(errorBody('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`));
  });
  return app;
}

/**
 * Slowloris defence for any node HTTP server (fastify's and the device WebSocket listener's): node's own
 * defaults leave headers 60 s and check only every 30 s. Set before listen: the check interval is read then.
 * An upgraded WebSocket leaves node's tracking, so these never cut a device session.
 */
export function applyHttpTimeouts(server: Server, limits: Limits): void {
  server.headersTimeout = limits.http_headers_timeout_ms;
  // node requires headersTimeout <= requestTimeout.
  server.requestTimeout = Math.max(limits.http_request_timeout_ms, limits.http_headers_timeout_ms);
  server.keepAliveTimeout = limits.http_keep_alive_timeout_ms;
  (server as { connectionsCheckingInterval?: number }).connectionsCheckingInterval =
    limits.http_connections_check_interval_ms;
}

/**
 * Counts a server's TCP connections, in total and per remote address. A connection over a cap is not read
 * further than its first request, which the caller answers 503 `too_many_connections` (using the verdict);
 * one that sends nothing is destroyed after `graceMs`, so a flood of idle sockets cannot hold descriptors.
 * When the total is full, the oldest connection that never finished a request is closed for the newcomer.
 */
export function guardConnections(server: Server, caps: ConnectionCaps): ConnectionVerdict {
  const perAddress = new Map<string, number>();
  const over = new WeakMap<Socket, ConnectionCap>();
  let total = 0;
  // Over-cap sockets waiting for their courtesy 503. Each holds a descriptor: a flood of 1,000 idle sockets held
  // for the grace period exhausted a 1,024 limit and reset fresh clients (bench --only sockets). Past this
  // many, an over-cap connection is closed at once, without an answer.
  let awaitingRefusal = 0;
  // Admitted connections that have not finished a request (or upgrade) yet, oldest first. A real client finishes
  // its headers within milliseconds; a socket that sits here is idle or slowloris. When the total cap is full,
  // the oldest of them makes room for a newcomer, so idle sockets spread over many addresses cannot lock every
  // new client out until the header timeout.
  const silent = new Map<Socket, () => void>();
  const spoke = (socket: Socket) => silent.delete(socket);
  server.prependListener('request', (request: { socket: Socket }) => spoke(request.socket));
  server.prependListener('upgrade', (request: { socket: Socket }) => spoke(request.socket));
  server.prependListener('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const mine = perAddress.get(address) ?? 0;
    if (total >= caps.maxConnections && mine < caps.maxPerAddress) evictOldestSilent();
    const broken: ConnectionCap | undefined =
      total >= caps.maxConnections
        ? 'connections'
        : mine >= caps.maxPerAddress
          ? 'connections_per_address'
          : undefined;
    if (broken) {
      caps.onLimit?.(broken);
      if (awaitingRefusal >= MAX_AWAITING_REFUSAL) {
        socket.destroy();
        return;
      }
      over.set(socket, broken);
      awaitingRefusal++;
      const timer = setTimeout(() => socket.destroy(), caps.graceMs);
      timer.unref();
      socket.once('close', () => {
        clearTimeout(timer);
        awaitingRefusal--;
      });
      return;
    }
    total++;
    perAddress.set(address, mine + 1);
    let released = false;
    // Once: an evicted socket gives its slot back at once, not when its close event comes.
    const release = () => {
      if (released) return;
      released = true;
      silent.delete(socket);
      total--;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    };
    silent.set(socket, release);
    socket.once('close', release);
  });

  function evictOldestSilent(): void {
    const oldest = silent.entries().next().value;
    if (!oldest) return;
    const [socket, release] = oldest;
    release();
    socket.destroy();
  }
  return (socket) => over.get(socket);
}

/** Over-cap connections held at once for their 503 (see guardConnections). */
export const MAX_AWAITING_REFUSAL = 32;

export function connectionsMessage(broken: ConnectionCap): string {
  return broken === 'connections'
    ? 'the server has too many connections; try again later'
    : 'too many connections from this address; try again later';
}

/** Node's clientError: malformed HTTP answered in the error shape (fastify's and the device WS listener's). */
export function writeClientError(error: Error, socket: Socket): void {
  const code = (error as { code?: string }).code;
  if (code === 'ECONNRESET' || socket.destroyed) return;
  const [status, body] =
    code === 'HPE_HEADER_OVERFLOW'
      ? [431, errorBody('headers_too_large', 'the request headers are larger than 16 KiB')]
      : code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, errorBody('request_timeout', 'the request did not arrive in time')]
        : [400, errorBody('bad_request', 'the request is not valid HTTP')];
  const text = JSON.stringify(body);
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy(error);
}

function sendError(error: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const httpError = toHttpError(error);
  if (httpError.status >= 500) request.log.error({ err: error, url: request.url }, 'request failed');
  else request.log.debug({ code: httpError.code, url: request.url }, httpError.message);
  void reply.status(httpError.status).send(errorBody(httpError.code, httpError.message));
}
