// The device WebSocket listener: path check, upgrade headers (any case, query-string fallback for
// browser clients), binary version negotiation and token check — all before the 101 — then a session.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { DEFAULT_LIMITS, type Limits } from '../config/schema.js';
import { isBinaryVersion, normaliseDeviceId } from '../protocol/index.js';
import {
  applyHttpTimeouts,
  connectionsMessage,
  guardConnections,
  type LimitName,
  writeClientError,
} from '../util/http-app.js';
import type { Logger } from '../util/log.js';
import { verifyDeviceToken } from './device-token.js';
import type { ConnectInfo } from './session.js';

export const DEVICE_WS_PATH = /^\/device\/v1\/?$/;
/** Hard cap at the WebSocket layer; the session drops (and logs) anything above its own smaller limit. */
const WS_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

export interface WsListenerOptions {
  logger: Logger;
  /** When set, upgrades must carry a valid per-device token (DESIGN §3). */
  authSecret?: string;
  onConnection: (socket: import('ws').WebSocket, info: ConnectInfo, request: IncomingMessage) => void;
  /** `limits.ws_max_connections*` and the `http_*` timeouts; missing keys take the schema defaults. */
  limits?: Partial<Limits>;
  /** Told of every limit hit, for `deskbot_voice_limit_refusals_total{limit}`. */
  onLimit?: (limit: LimitName) => void;
}

export type UpgradeDecision =
  | { ok: true; info: ConnectInfo }
  | { ok: false; status: number; code: string; message: string };

/** Decides on an upgrade request from its URL and headers alone (pure, so it is tested by table). */
export function decideUpgrade(
  request: IncomingMessage,
  authSecret?: string,
  nowMs = Date.now(),
): UpgradeDecision {
  const url = new URL(request.url ?? '/', 'http://device.invalid');
  if (!DEVICE_WS_PATH.test(url.pathname)) {
    return { ok: false, status: 404, code: 'not_found', message: `no WebSocket endpoint at ${url.pathname}` };
  }
  const field = (header: string, ...queryNames: string[]): string | undefined => {
    const value = request.headers[header];
    if (typeof value === 'string' && value !== '') return value;
    for (const name of queryNames) {
      const fromQuery = url.searchParams.get(name);
      if (fromQuery) return fromQuery;
    }
    return undefined;
  };
  const rawDeviceId = field('device-id', 'device-id', 'device_id');
  if (!rawDeviceId) {
    return { ok: false, status: 400, code: 'missing_device_id', message: 'Device-Id header is required' };
  }
  const deviceId = normaliseDeviceId(rawDeviceId);
  if (!deviceId) {
    return {
      ok: false,
      status: 400,
      code: 'bad_device_id',
      message: 'Device-Id must be a MAC like aa:bb:cc:dd:ee:ff',
    };
  }
  const rawVersion = field('protocol-version', 'protocol-version', 'protocol_version') ?? '1';
  const binaryVersion = Number(rawVersion);
  if (!isBinaryVersion(binaryVersion)) {
    return {
      ok: false,
      status: 400,
      code: 'unsupported_protocol_version',
      message: `Protocol-Version ${rawVersion} is not supported (allowed: 1, 2, 3)`,
    };
  }
  if (authSecret) {
    const auth =
      field('authorization', 'authorization') ??
      (url.searchParams.get('token') ? `Bearer ${url.searchParams.get('token')}` : '');
    const token = bearerToken(auth);
    if (token === '')
      return {
        ok: false,
        status: 401,
        code: 'missing_token',
        message: 'Authorization: Bearer <token> is required',
      };
    if (token === null)
      return {
        ok: false,
        status: 401,
        code: 'token_malformed',
        message: 'Authorization must be Bearer <token>',
      };
    const check = verifyDeviceToken(authSecret, token, deviceId, nowMs);
    if (!check.ok)
      return {
        ok: false,
        status: 401,
        code: `token_${check.reason}`,
        message: `device token refused: ${check.reason}`,
      };
  }
  return {
    ok: true,
    info: {
      deviceId,
      clientId: field('client-id', 'client-id', 'client_id') ?? '',
      binaryVersion,
      remoteAddress: request.socket.remoteAddress ?? '',
    },
  };
}

/**
 * The token of an Authorization value: '' when there is none ("Bearer" alone included), null for another scheme
 * or extra words. The scheme is case-insensitive (RFC 9110). The firmware always sends "Bearer <token>" for our
 * space-free tokens; a bare token was accepted before and still is (the HMAC decides, not the spelling).
 */
function bearerToken(auth: string): string | null {
  const parts = auth.trim().split(/\s+/).filter(Boolean);
  if (parts.length === 0) return '';
  const isScheme = /^bearer$/i.test(parts[0]!);
  if (parts.length === 1) return isScheme ? '' : parts[0]!;
  return parts.length === 2 && isScheme ? parts[1]! : null;
}

export function createWsListener(options: WsListenerOptions): Server {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: WS_MAX_PAYLOAD_BYTES,
    perMessageDeflate: false,
  });
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const server = createServer((req, res) => {
    const broken = verdict(req.socket);
    if (broken) {
      res.writeHead(503, { 'content-type': 'application/json', connection: 'close' });
      res.end(
        JSON.stringify({ error: { code: 'too_many_connections', message: connectionsMessage(broken) } }),
      );
      return;
    }
    res.writeHead(426, { 'content-type': 'application/json', upgrade: 'websocket' });
    res.end(
      JSON.stringify({
        error: { code: 'upgrade_required', message: 'connect with a WebSocket to /device/v1/' },
      }),
    );
  });
  applyHttpTimeouts(server, limits);
  // Every TCP connection counts, upgraded or not: ~1,000 sockets that never said hello exhausted a 1,024
  // descriptor limit. The pre-hello deadline (server.hello_timeout_sec) frees the ones under the caps.
  const verdict = guardConnections(server, {
    maxConnections: limits.ws_max_connections,
    maxPerAddress: limits.ws_max_connections_per_address,
    graceMs: limits.over_limit_grace_ms,
    onLimit: (cap) => options.onLimit?.(`ws_${cap}`),
  });
  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const broken = verdict(request.socket);
    if (broken) {
      options.logger.warn({ limit: broken, remote: request.socket.remoteAddress }, 'upgrade refused');
      refuse(socket, 503, 'too_many_connections', connectionsMessage(broken));
      return;
    }
    const decision = decideUpgrade(request, options.authSecret);
    if (!decision.ok) {
      options.logger.warn(
        { code: decision.code, url: request.url, remote: request.socket.remoteAddress },
        decision.message,
      );
      refuse(socket, decision.status, decision.code, decision.message);
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => {
      // The device can vanish without a Close frame; TCP keepalive lets the kernel notice.
      request.socket.setKeepAlive(true, 30_000);
      request.socket.setNoDelay(true);
      options.onConnection(ws, decision.info, request);
    });
  });
  // Malformed HTTP on the device port gets the error shape too, not node's bare 400 (a slowloris its 408).
  server.on('clientError', (error, socket) => {
    if ((error as { code?: string }).code === 'ERR_HTTP_REQUEST_TIMEOUT')
      options.onLimit?.('request_timeout');
    writeClientError(error, socket as Socket);
  });
  server.on('close', () => wss.close());
  return server;
}

function refuse(socket: Duplex, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { code, message } });
  const reason =
    { 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 503: 'Service Unavailable' }[status] ??
    'Error';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
