// CORS for the device-facing HTTP routes (OTA, activation, firmware download, vision). Browser clients such as
// the xiaozhi-esp32-server test page are served from another origin: their POST with Device-Id/Client-Id
// headers is preceded by a preflight, and the browser hides any reply without Access-Control-Allow-Origin.
// These routes take no ambient credential (no cookie), so a permissive origin gives a page nothing it could
// not get with curl. Admin routes get no CORS at all: a browser page must never be able to call them.
import type { FastifyInstance } from 'fastify';

/** Request headers real device clients send (SPEC "Boot (OTA) records", the vision upload). */
export const CORS_ALLOWED_HEADERS = [
  'content-type',
  'device-id',
  'client-id',
  'activation-version',
  'authorization',
  'accept-language',
  'user-agent',
  'serial-number',
  'protocol-version',
  // The browser test page's newer connector names the agent it wants.
  'agent-id',
];
const ALLOWED_METHODS = 'GET, POST, OPTIONS';
const PREFLIGHT_MAX_AGE_SEC = 600;

/**
 * Answers preflights on `routes` (route patterns as registered) with 204 and puts Access-Control-Allow-Origin
 * on every reply of those routes, errors included. Call after the routes are registered.
 */
export function registerDeviceCors(app: FastifyInstance, routes: readonly string[]): void {
  const covered = new Set(routes);
  app.addHook('onSend', async (request, reply, payload) => {
    if (covered.has(request.routeOptions.url ?? '')) {
      void reply.header('access-control-allow-origin', '*');
      void reply.header('access-control-expose-headers', 'content-length, content-type');
    }
    return payload;
  });
  for (const route of routes) {
    app.options(route, async (_request, reply) => {
      void reply
        .status(204)
        .header('access-control-allow-methods', ALLOWED_METHODS)
        .header('access-control-allow-headers', CORS_ALLOWED_HEADERS.join(', '))
        .header('access-control-max-age', String(PREFLIGHT_MAX_AGE_SEC))
        .send();
    });
  }
}
