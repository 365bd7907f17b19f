// GET /v1/models and POST /v1/chat/completions on the bridge port, passed through to LOCAL_ROUTER_URL (DESIGN §3):
// SPEC's default TWOTIER_LOCAL_URL is the bridge's own /v1. One hop, streamed, cancelled when the caller leaves.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { joinUrl } from '../providers/openai-client.js';
import { errorBody } from '../util/http-error.js';

export function registerPassthrough(app: FastifyInstance, routerUrl: string): void {
  const forward = async (request: FastifyRequest, reply: FastifyReply, path: string) => {
    if (!routerUrl) {
      return reply
        .status(503)
        .send(
          errorBody(
            'no_local_router',
            'no local model router is configured: set LOCAL_ROUTER_URL (llama.cpp server, llama-swap, Ollama ...)',
          ),
        );
    }
    const controller = new AbortController();
    // The response closing before it finished means the caller left (the request's own 'close' fires as soon
    // as its body has been read, so it cannot tell).
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    let upstream: Response;
    try {
      upstream = await fetch(joinUrl(routerUrl, path), {
        method: request.method,
        headers: {
          ...(request.headers['content-type']
            ? { 'content-type': String(request.headers['content-type']) }
            : {}),
          ...(request.headers.authorization ? { authorization: String(request.headers.authorization) } : {}),
        },
        ...(request.method === 'POST' ? { body: JSON.stringify(request.body ?? {}) } : {}),
        signal: AbortSignal.any([controller.signal, AbortSignal.timeout(30_000)]),
      });
    } catch (error) {
      return reply
        .status(502)
        .send(
          errorBody(
            'local_router_unreachable',
            `local router ${routerUrl} did not answer: ${(error as Error).message}`,
          ),
        );
    }
    reply.hijack();
    reply.raw.writeHead(upstream.status, {
      'content-type': upstream.headers.get('content-type') ?? 'application/json',
      'cache-control': 'no-cache',
    });
    try {
      for await (const chunk of upstream.body as unknown as AsyncIterable<Uint8Array>) {
        if (reply.raw.destroyed) break;
        reply.raw.write(chunk);
      }
    } catch {
      // the caller left or the router dropped the stream; nothing more to send
    } finally {
      controller.abort();
      reply.raw.end();
    }
  };
  app.get('/v1/models', (request, reply) => forward(request, reply, 'models'));
  app.post('/v1/chat/completions', (request, reply) => forward(request, reply, 'chat/completions'));
}
