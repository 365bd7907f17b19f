// The bridge's admin routes answer only this machine (SPEC: localhost only, else 403).
// The TCP peer address decides; X-Forwarded-For and similar headers are never read. A loopback peer is not
// enough on its own: a web page the operator opens can make their browser (a loopback peer) send requests to
// a name that resolves to 127.0.0.1 (DNS rebinding). So the Host (and Origin, when a browser sends one) must
// name this machine too: a loopback name or address, or one of `bridge.admin_hosts`.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isLoopback } from '../util/cidr.js';
import { errorBody } from '../util/http-error.js';

const LOOPBACK_NAMES = new Set(['localhost', '::1']);

/** The host name of a Host header or an origin's host (`[::1]:8080` → `::1`), lower case. */
export function hostNameOf(host: string): string {
  const lower = host.trim().toLowerCase();
  if (lower.startsWith('[')) return lower.slice(1, lower.indexOf(']') > 0 ? lower.indexOf(']') : undefined);
  return lower.replace(/:\d*$/, '').replace(/\.$/, '');
}

function isLocalName(name: string, extraHosts: ReadonlySet<string>): boolean {
  return LOOPBACK_NAMES.has(name) || name.endsWith('.localhost') || isLoopback(name) || extraHosts.has(name);
}

/** Why an admin request must be refused, or null (pure: peer, Host and Origin in, verdict out). */
export function adminRefusal(
  peer: string | undefined,
  headers: { host?: string; origin?: string | string[] },
  extraHosts: ReadonlySet<string> = new Set(),
): string | null {
  if (!isLoopback(peer)) return 'admin routes are only reachable from this machine (localhost)';
  // HTTP/1.1 requires Host; a client that sends none (HTTP/1.0 tools) is not a browser.
  if (headers.host !== undefined && !isLocalName(hostNameOf(headers.host), extraHosts)) {
    return `admin routes answer only requests addressed to this machine, not to "${headers.host.slice(0, 100)}"`;
  }
  const origin = Array.isArray(headers.origin) ? headers.origin[0] : headers.origin;
  if (origin !== undefined) {
    let name: string;
    try {
      name = hostNameOf(new URL(origin).host);
    } catch {
      return 'admin routes refuse requests from pages without an origin';
    }
    if (!isLocalName(name, extraHosts)) return 'admin routes refuse requests from pages of another site';
  }
  return null;
}

/** onRequest hook for /admin/*: 403 in the error shape for anyone who is not this machine. */
export function loopbackOnly(extraHosts: readonly string[] = []) {
  const extra = new Set(extraHosts.map((host) => hostNameOf(host)));
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const peer = request.socket.remoteAddress;
    const refusal = adminRefusal(peer, request.headers, extra);
    if (refusal === null) return;
    request.log.warn(
      { peer, host: request.headers.host, origin: request.headers.origin, url: request.url },
      'admin route refused',
    );
    await reply.status(403).send(errorBody('forbidden', refusal));
  };
}
