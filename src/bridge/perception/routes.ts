// The bridge's perception routes:
//   POST /api/perception/event    a perception event record from the voice server → {ok: true}
//   GET  /api/perception/devices  the per-device state snapshot → {devices: [...]}
//   GET  /api/perception/stream   server-sent events for the dashboard (first event `snapshot`)
import type { FastifyInstance } from 'fastify';
import { parsePerceptionEvent } from './bus.js';
import type { Perception } from './index.js';

export const PERCEPTION_STREAM_PATH = '/api/perception/stream';

export function registerPerceptionRoutes(app: FastifyInstance, perception: Perception): void {
  const { limits } = perception;
  const shape = { maxKeys: limits.perception_event_max_keys, maxDepth: limits.perception_event_max_depth };
  // A small body limit of its own: a 1 MiB event once held the event loop for over a second.
  app.post('/api/perception/event', { bodyLimit: limits.perception_event_max_bytes }, async (request) => {
    perception.ingest(parsePerceptionEvent(request.body, Date.now(), shape));
    return { ok: true };
  });

  app.get('/api/perception/devices', async () => ({ devices: perception.devices.snapshot() }));

  app.get(PERCEPTION_STREAM_PATH, async (request, reply) => {
    // The TCP peer, never X-Forwarded-For (fastify's trustProxy is off): a header cannot evict others.
    perception.sse.attach(reply, request.socket.remoteAddress ?? '');
  });

  // Open event streams would hold app.close() up; end them (and the consumers' timers) first.
  app.addHook('preClose', async () => {
    perception.stop();
  });
}
