// The LAN dashboard (/ui) and the LED ring mirror (/ui/led-ring-mirror).
//
//   GET  /ui, /ui/led-ring-mirror   the pages (ui/*.html)
//   GET  /ui/assets/<name>          allow-listed page scripts and styles; led.js = src/robot/led.ts compiled
//   GET  /ui/api/overview           everything the dashboard shows (no secrets)
//   GET  /ui/api/ring?device=<id>   the mirror's input for renderRing (default: the latest-updated device)
//   GET  /ui/api/session            {read_only, logged_in, csrf_token?}
//   POST /ui/login {password}       → session cookie + CSRF token; POST /ui/logout
//   POST /ui/api/kid-mode {enabled} · /ui/api/smart-mode {enabled, device_id?} · /ui/api/state {state, device_id?}
//
// Mutations: 403 ui_read_only without UI_PASSWORD; 403 cross_site from another origin; 401 login_required
// without a live session; 403 csrf_failed without the session's X-CSRF-Token. Then the same Controls as the
// loopback admin routes, so a flip behaves the same wherever it comes from.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { canonicalDeviceId } from '../../protocol/index.js';
import { ROBOT_STATES } from '../../robot/states.js';
import { errorBody, HttpError, parseBody } from '../../util/http-error.js';
import { type Logger, ThrottledLog } from '../../util/log.js';
import { PACKAGE_ROOT } from '../../version.js';
import type { Calendar } from '../calendar/index.js';
import type { Controls } from '../controls.js';
import type { Perception } from '../perception/index.js';
import type { TurnLog } from '../turns.js';
import {
  LedModule,
  lookupAsset,
  readUiFile,
  type StaticFile,
  UI_PAGES,
  UI_SECURITY_HEADERS,
} from './assets.js';
import {
  clearedSessionCookie,
  crossSiteReason,
  LoginThrottle,
  parseCookies,
  SESSION_COOKIE,
  type Session,
  SessionStore,
  sameSecret,
  sessionCookie,
} from './auth.js';
import { buildOverview, RecentEvents } from './overview.js';
import { ringWire } from './ring.js';

export interface UiOptions {
  /** '' = the dashboard is read-only (no login, every mutation 403). */
  password: string;
  sessionTtlSec: number;
  perception: Perception;
  controls: Controls;
  turns: TurnLog;
  /** Devices connected to the voice server now (GET {VOICE_URL}/device/admin/devices); throws when down. */
  connectedDevices: () => Promise<Array<Record<string, unknown>>>;
  calendar: Calendar;
  logger: Logger;
  /** Epoch ms (default Date.now). Should be the perception clock: ring ages are measured against it. */
  now?: () => number;
  /** Folder holding ui/, src/ and dist/ (default PACKAGE_ROOT). */
  root?: string;
  /** Perception events kept for the dashboard (default 50). */
  recentEvents?: number;
  /** Failed logins per address before a wait (default 5), and the wait (default 60 s). */
  loginMaxFailures?: number;
  loginLockMs?: number;
}

const READ_ONLY_MESSAGE =
  'the dashboard is read-only: set UI_PASSWORD (config ui.password) and restart the bridge to enable its controls';

/** How long one answer of the voice server's device list serves every dashboard. */
const CONNECTED_DEVICES_REUSE_MS = 1000;

const deviceId = z.string().min(1).max(128).transform(canonicalDeviceId);
const schemas = {
  login: z.object({ password: z.string().max(1024) }),
  kidMode: z.object({ enabled: z.boolean() }),
  smartMode: z.object({ enabled: z.boolean(), device_id: deviceId.optional() }),
  state: z.object({ state: z.enum(ROBOT_STATES), device_id: deviceId.optional() }),
  ringQuery: z.object({ device: deviceId.optional() }),
};

export function registerUiRoutes(app: FastifyInstance, options: UiOptions): void {
  const now = options.now ?? Date.now;
  const root = options.root ?? PACKAGE_ROOT;
  const readOnly = options.password === '';
  const { perception, controls, logger } = options;
  const sessions = new SessionStore({ ttlSec: options.sessionTtlSec, now });
  const throttle = new LoginThrottle({
    now,
    ...(options.loginMaxFailures !== undefined ? { maxFailures: options.loginMaxFailures } : {}),
    ...(options.loginLockMs !== undefined ? { lockMs: options.loginLockMs } : {}),
  });
  const events = new RecentEvents(perception.bus, options.recentEvents ?? 50, now);
  const led = new LedModule(root);
  // Every open dashboard refetches on each perception event burst; they share one voice-server call a second.
  let devicesCall: { atMs: number; result: Promise<Array<Record<string, unknown>>> } | undefined;
  const connectedDevices = () => {
    if (!devicesCall || now() - devicesCall.atMs >= CONNECTED_DEVICES_REUSE_MS || now() < devicesCall.atMs)
      devicesCall = { atMs: now(), result: options.connectedDevices() };
    return devicesCall.result;
  };
  app.addHook('onClose', async () => events.close());
  // A hostile page or a guessing script can send refusals in a loop; the log gets a sample and a count.
  const refusals = new ThrottledLog(logger, 10, 60_000, now);

  const cookieOf = (request: FastifyRequest) => parseCookies(request.headers.cookie).get(SESSION_COOKIE);
  const sessionOf = (request: FastifyRequest): Session | undefined =>
    readOnly ? undefined : sessions.get(cookieOf(request));

  const refuseCrossSite = (request: FastifyRequest) => {
    const reason = crossSiteReason(request.headers);
    if (reason) {
      refusals.warn({ peer: request.ip, url: request.url, reason }, 'dashboard request refused');
      throw new HttpError(403, 'cross_site', `refused: ${reason}`);
    }
  };

  /** onRequest of every mutation: runs before the body is read, so refusals never depend on the body. */
  const guard = async (request: FastifyRequest) => {
    if (readOnly) throw new HttpError(403, 'ui_read_only', READ_ONLY_MESSAGE);
    refuseCrossSite(request);
    const session = sessionOf(request);
    if (!session)
      throw new HttpError(401, 'login_required', 'log in to the dashboard first (POST /ui/login)');
    const token = request.headers['x-csrf-token'];
    if (typeof token !== 'string' || !sameSecret(token, session.csrfToken)) {
      throw new HttpError(403, 'csrf_failed', 'missing or wrong X-CSRF-Token header; reload the dashboard');
    }
  };

  const sendFile = async (reply: FastifyReply, entry: StaticFile) => {
    let body: Buffer;
    try {
      body = await readUiFile(root, entry);
    } catch (error) {
      logger.error({ err: (error as Error).message, file: entry.file }, 'dashboard file missing');
      throw new HttpError(404, 'not_found', `dashboard file ${entry.file} is missing from this install`);
    }
    return reply.headers(UI_SECURITY_HEADERS).type(entry.contentType).send(body);
  };

  for (const [path, entry] of Object.entries(UI_PAGES)) {
    app.get(path, async (_request, reply) => sendFile(reply, entry));
  }

  // Registered before the parametric route, and fastify prefers static paths anyway.
  app.get('/ui/assets/led.js', async (_request, reply) => {
    let js: string;
    try {
      js = await led.js();
    } catch (error) {
      logger.error({ err: (error as Error).message }, 'LED module unavailable for the mirror');
      throw new HttpError(
        503,
        'led_module_unavailable',
        `the LED module could not be loaded: ${(error as Error).message}`,
      );
    }
    return reply.headers(UI_SECURITY_HEADERS).type('text/javascript; charset=utf-8').send(js);
  });

  app.get<{ Params: { name: string } }>('/ui/assets/:name', async (request, reply) => {
    const entry = lookupAsset(request.params.name);
    if (!entry) throw new HttpError(404, 'not_found', 'no such dashboard asset');
    return sendFile(reply, entry);
  });

  app.get('/ui/api/overview', async (request, reply) => {
    const overview = await buildOverview({
      readOnly,
      loggedIn: sessionOf(request) !== undefined,
      controls,
      devices: () => perception.devices.snapshot(),
      events,
      turns: options.turns,
      connectedDevices,
      calendar: options.calendar,
      nowMs: now(),
    });
    return reply.header('cache-control', 'no-store').send(overview);
  });

  app.get('/ui/api/ring', async (request, reply) => {
    const parsed = schemas.ringQuery.safeParse(request.query ?? {});
    if (!parsed.success) throw new HttpError(400, 'invalid_query', 'device: a device id of 1-128 characters');
    const query = parsed.data;
    const device = query.device ? perception.devices.get(query.device) : perception.devices.snapshot()[0];
    const wire = ringWire({
      device,
      ...(query.device ? { requestedId: query.device } : {}),
      toggles: controls.toggles(),
      nowMs: now(),
      refreshing: device ? perception.consumers.refresher.isRefreshing(device.device_id) : false,
    });
    return reply.header('cache-control', 'no-store').send(wire);
  });

  app.get('/ui/api/session', async (request, reply) => {
    const session = sessionOf(request);
    return reply.header('cache-control', 'no-store').send({
      read_only: readOnly,
      logged_in: session !== undefined,
      ...(session ? { csrf_token: session.csrfToken } : {}),
    });
  });

  app.post('/ui/login', async (request, reply) => {
    if (readOnly) throw new HttpError(403, 'ui_read_only', READ_ONLY_MESSAGE);
    refuseCrossSite(request);
    const waitMs = throttle.retryAfterMs(request.ip);
    if (waitMs > 0) {
      return reply
        .status(429)
        .header('retry-after', String(Math.ceil(waitMs / 1000)))
        .send(errorBody('too_many_attempts', 'too many wrong passwords; wait a minute and try again'));
    }
    const { password } = parseBody(schemas.login, request.body);
    if (!sameSecret(password, options.password)) {
      throttle.failed(request.ip);
      refusals.warn({ peer: request.ip }, 'dashboard login with a wrong password');
      throw new HttpError(401, 'bad_password', 'wrong dashboard password');
    }
    throttle.succeeded(request.ip);
    sessions.delete(cookieOf(request));
    const { id, session } = sessions.create();
    logger.info({ peer: request.ip }, 'dashboard login');
    return reply
      .header('set-cookie', sessionCookie(id, options.sessionTtlSec))
      .header('cache-control', 'no-store')
      .send({ ok: true, csrf_token: session.csrfToken, expires_in_sec: options.sessionTtlSec });
  });

  app.post('/ui/logout', async (request, reply) => {
    refuseCrossSite(request);
    sessions.delete(cookieOf(request));
    return reply.header('set-cookie', clearedSessionCookie()).send({ ok: true });
  });

  app.post('/ui/api/kid-mode', { onRequest: guard }, async (request) => {
    const body = parseBody(schemas.kidMode, request.body);
    logger.info({ peer: request.ip, enabled: body.enabled }, 'dashboard sets kid_mode');
    return controls.setKidMode(body.enabled);
  });

  app.post('/ui/api/smart-mode', { onRequest: guard }, async (request) => {
    const body = parseBody(schemas.smartMode, request.body);
    logger.info({ peer: request.ip, enabled: body.enabled }, 'dashboard sets smart_mode');
    return controls.setSmartMode(body.enabled, body.device_id);
  });

  app.post('/ui/api/state', { onRequest: guard }, async (request) => {
    const body = parseBody(schemas.state, request.body);
    logger.info({ peer: request.ip, state: body.state, device: body.device_id }, 'dashboard sets the state');
    return controls.setState(body.state, body.device_id);
  });
}
