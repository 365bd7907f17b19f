// The bridge's admin routes answer only peers on this machine (SPEC: localhost only, else 403).
// The TCP peer address decides; X-Forwarded-For and similar headers are never read.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorBody } from '../util/http-error.js';

export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  if (address === '::1') return true;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** onRequest hook for /admin/*: 403 in the error shape for anyone not on loopback. */
export async function loopbackOnly(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const peer = request.socket.remoteAddress;
  if (!isLoopback(peer)) {
    request.log.warn({ peer, url: request.url }, 'admin route refused to a non-loopback peer');
    await reply
      .status(403)
      .send(errorBody('forbidden', 'admin routes are only reachable from this machine (localhost)'));
  }
}
