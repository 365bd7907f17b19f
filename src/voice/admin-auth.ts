// Protection of the voice server's admin routes (/device/admin/*: microphone, camera, the model URL, the toggles).
// Locked by default (issue 13): loopback callers are served; anyone else needs the admin token, which is
// VOICE_ADMIN_TOKEN or, when unset, one generated into DATA_DIR (admin-token.ts) that the bridge on the same host
// reads. VOICE_ADMIN_TOKEN makes the token required from loopback too; VOICE_ADMIN_ALLOW (CIDRs) limits which
// peers may call at all and, without VOICE_ADMIN_TOKEN, replaces the loopback rule. The toggles (kid_mode,
// smart_mode) always need the token: they change only through the bridge, so the two never disagree.
// The TCP peer decides; X-Forwarded-For and friends are never read (anyone can send them).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CidrList, isLoopback } from '../util/cidr.js';
import { errorBody } from '../util/http-error.js';
import { isUnderPrefix } from '../util/path-guard.js';

export const VOICE_ADMIN_PREFIX = '/device/admin';
/** Routes that only the bridge (the token holder) may call, from anywhere. */
export const BRIDGE_ONLY_ROUTES: ReadonlySet<string> = new Set(['/device/admin/set-toggle']);

export interface VoiceAdminAuthOptions {
  /** The admin token (configured or generated); never empty. */
  token: string;
  /** The operator set VOICE_ADMIN_TOKEN: every caller needs it, loopback included. */
  tokenRequired: boolean;
  /** CIDRs the TCP peer must be inside; empty = any peer. */
  allow: readonly string[];
}

export type AdminVerdict =
  | { ok: true }
  | { ok: false; status: 403; code: 'forbidden'; message: string; reason: string }
  | { ok: false; status: 401; code: 'unauthorized'; message: string; reason: string };

/** Who may call, in words, for the start-up banner. */
export function describeAdminAccess(options: VoiceAdminAuthOptions, tokenSource: string): string {
  const where = tokenSource === 'env' ? 'VOICE_ADMIN_TOKEN' : `the token in ${tokenSource}`;
  if (options.tokenRequired) {
    return `every caller needs ${where}${options.allow.length ? `, from ${options.allow.join(', ')}` : ''}`;
  }
  if (options.allow.length) return `callers in ${options.allow.join(', ')}; set-toggle needs ${where}`;
  return `this machine only; other hosts need ${where}; set-toggle needs it from anywhere`;
}

/** The decision for one request from its peer address and Authorization header (pure, so tested directly). */
export function createAdminGuard(options: VoiceAdminAuthOptions) {
  const allow = options.allow.length > 0 ? new CidrList(options.allow) : null;
  // Hashing first makes the comparison constant-time regardless of the given token's length.
  const expected = digest(options.token);
  return (
    peer: string | undefined,
    authorization: string | undefined,
    route: { bridgeOnly: boolean } = { bridgeOnly: false },
  ): AdminVerdict => {
    if (allow && !allow.contains(peer)) {
      return {
        ok: false,
        status: 403,
        code: 'forbidden',
        message: 'voice admin routes are not reachable from this address (VOICE_ADMIN_ALLOW)',
        reason: 'peer_not_allowed',
      };
    }
    const needsToken = options.tokenRequired || route.bridgeOnly || (!allow && !isLoopback(peer));
    if (!needsToken) return { ok: true };
    const given = bearerToken(authorization);
    if (given !== null && timingSafeEqual(digest(given), expected)) return { ok: true };
    return {
      ok: false,
      status: 401,
      code: 'unauthorized',
      message: route.bridgeOnly
        ? 'kid_mode and smart_mode change only through the bridge (POST /admin/kid-mode, /admin/smart-mode), which holds the voice admin token'
        : 'voice admin routes need Authorization: Bearer <token> (VOICE_ADMIN_TOKEN, or DATA_DIR/voice-admin-token)',
      reason: given === null ? 'missing_token' : 'wrong_token',
    };
  };
}

/**
 * Registers the guard as a root onRequest hook, so it runs for every /device/admin path whether or not a route
 * exists (an outsider learns nothing from 404s) and before any body is read.
 */
export function registerAdminAuth(app: FastifyInstance, options: VoiceAdminAuthOptions): void {
  const guard = createAdminGuard(options);
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (!isUnderPrefix(request, VOICE_ADMIN_PREFIX)) return;
    const peer = request.socket.remoteAddress;
    // The routed pattern, not the raw path: `//device//admin/set-%74oggle` is the same route.
    const bridgeOnly = BRIDGE_ONLY_ROUTES.has(request.routeOptions.url ?? '');
    const verdict = guard(peer, request.headers.authorization, { bridgeOnly });
    if (verdict.ok) return;
    request.log.warn(
      { peer, method: request.method, path: request.url.split('?')[0], reason: verdict.reason },
      'voice admin request refused',
    );
    if (verdict.status === 401) reply.header('www-authenticate', 'Bearer realm="deskbot-voice-admin"');
    await reply.status(verdict.status).send(errorBody(verdict.code, verdict.message));
  });
}

/** The token of `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 9110), the token is not. */
function bearerToken(header: string | undefined): string | null {
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return match ? match[1]! : null;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
