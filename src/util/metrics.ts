// Shared by the voice server's and the bridge's Prometheus endpoints.
import type { FastifyInstance } from 'fastify';

/** Histogram buckets (seconds) for speech latencies: first audio, stt, first token. */
export const LATENCY_BUCKETS_SEC = [0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13];

/** GET /metrics: the registry's text exposition. */
export function registerMetricsRoute(
  app: FastifyInstance,
  metrics: { text(): Promise<{ contentType: string; body: string }> },
): void {
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await metrics.text();
    return reply.type(contentType).send(body);
  });
}
