// Does a request fall under a protected path prefix? Decided for the path the router would match, not for the
// raw request line: fastify's router percent-decodes ("/%61dmin" routes to "/admin") and, with
// ignoreDuplicateSlashes, folds "//admin" into "/admin", so a plain startsWith on request.url lets those through.
import type { FastifyRequest } from 'fastify';

/** True when the request path is `prefix` or below it (prefix without a trailing slash, e.g. "/device/admin"). */
export function isUnderPrefix(request: FastifyRequest, prefix: string): boolean {
  const routed = request.routeOptions.url;
  if (routed !== undefined && pathUnder(routed, prefix)) return true;
  return pathUnder(normalisePath(request.url), prefix);
}

/** The path part of a request target, percent-decoded, slashes folded, lower-cased (case is no way around). */
export function normalisePath(url: string): string {
  const raw = url.split(/[?#]/, 1)[0] ?? '';
  let decoded = raw;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    // A broken escape ("%zz") never routes anywhere; comparing the raw text is enough.
  }
  return decoded.replace(/\/{2,}/g, '/').toLowerCase();
}

function pathUnder(path: string, prefix: string): boolean {
  const p = prefix.toLowerCase();
  const lower = path.toLowerCase();
  return lower === p || lower.startsWith(`${p}/`) || lower.startsWith(`${p};`);
}
