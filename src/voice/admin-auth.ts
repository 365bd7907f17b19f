// Optional protection of the voice server's admin routes (DESIGN §3): VOICE_ADMIN_ALLOW (CIDR list of TCP peers)
// and VOICE_ADMIN_TOKEN (Bearer). Both off by default, because SPEC leaves these routes to network ACLs.
// The TCP peer decides; X-Forwarded-For and friends are never read (anyone can send them).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CidrList } from '../util/cidr.js';
import { errorBody } from '../util/http-error.js';
import { isUnderPrefix } from '../util/path-guard.js';

export const VOICE_ADMIN_PREFIX = '/device/admin';

export interface VoiceAdminAuthOptions {
  /** Required Bearer token; '' = no token needed. */
  token: string;
  /** CIDRs the TCP peer must be inside; empty = any peer. */
  allow: readonly string[];
}

export type AdminVerdict =
  | { ok: true }
  | { ok: false; status: 403; code: 'forbidden'; message: string; reason: string }
  | { ok: false; status: 401; code: 'unauthorized'; message: string; reason: string };

/** The decision for one request from its peer address and Authorization header (pure, so tested directly). */
export function createAdminGuard(options: VoiceAdminAuthOptions) {
  const allow = options.allow.length > 0 ? new CidrList(options.allow) : null;
  // Hashing first makes the comparison constant-time regardless of the given token's length.
  const expected = options.token ? digest(options.token) : null;
  return (peer: string | undefined, authorization: string | undefined): AdminVerdict => {
    if (allow && !allow.contains(peer)) {
      return {
        ok: false,
        status: 403,
        code: 'forbidden',
        message: 'voice admin routes are not reachable from this address (VOICE_ADMIN_ALLOW)',
        reason: 'peer_not_allowed',
      };
    }
    if (expected) {
      const given = bearerToken(authorization);
      if (given === null || !timingSafeEqual(digest(given), expected)) {
        return {
          ok: false,
          status: 401,
          code: 'unauthorized',
          message: 'voice admin routes need Authorization: Bearer <VOICE_ADMIN_TOKEN>',
          reason: given === null ? 'missing_token' : 'wrong_token',
        };
      }
    }
    return { ok: true };
  };
}

/**
 * Registers the guard as a root onRequest hook, so it runs for every /device/admin path whether or not a route
 * exists (an outsider learns nothing from 404s) and before any body is read. No-op when both are off.
 */
export function registerAdminAuth(app: FastifyInstance, options: VoiceAdminAuthOptions): void {
  if (!options.token && options.allow.length === 0) return;
  const guard = createAdminGuard(options);
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (!isUnderPrefix(request, VOICE_ADMIN_PREFIX)) return;
    const peer = request.socket.remoteAddress;
    const verdict = guard(peer, request.headers.authorization);
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
