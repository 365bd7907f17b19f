// A fastify instance with the DESIGN §2 error shape on every failure path, shared by voice server and bridge.
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
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
  });
  app.setErrorHandler((error, request, reply) => {
    const httpError = toHttpError(error);
    if (httpError.status >= 500) request.log.error({ err: error, url: request.url }, 'request failed');
    else request.log.debug({ code: httpError.code, url: request.url }, httpError.message);
    void reply.status(httpError.status).send(errorBody(httpError.code, httpError.message));
  });
  app.setNotFoundHandler((request, reply) => {
    void reply
      .status(404)
      .send(errorBody('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`));
  });
  return app;
}
