// A fastify instance with the DESIGN §2 error shape on every failure path, shared by voice server and bridge.
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import { errorBody, toHttpError } from './http-error.js';
import type { Logger } from './log.js';

export interface HttpAppOptions {
  logger: Logger;
  /** Bytes; larger bodies get 413 in the error shape. */
  bodyLimit?: number;
}

export function createHttpApp(options: HttpAppOptions): FastifyInstance {
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
    clientErrorHandler: writeClientError,
  });
  app.setErrorHandler(sendError);
  app.setNotFoundHandler((request, reply) => {
    void reply
      .status(404)
      .send(errorBody('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`));
  });
  return app;
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
