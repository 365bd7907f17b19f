// The bridge's perception routes:
//   POST /api/perception/event    a perception event record from the voice server → {ok: true}
//   GET  /api/perception/devices  the per-device state snapshot → {devices: [...]}
//   GET  /api/perception/stream   server-sent events for the dashboard (first event `snapshot`)
import type { FastifyInstance } from 'fastify';
import { parsePerceptionEvent } from './bus.js';
import type { Perception } from './index.js';

export const PERCEPTION_STREAM_PATH = '/api/perception/stream';

export function registerPerceptionRoutes(app: FastifyInstance, perception: Perception): void {
  app.post('/api/perception/event', async (request) => {
    perception.ingest(parsePerceptionEvent(request.body));
    return { ok: true };
  });

  app.get('/api/perception/devices', async () => ({ devices: perception.devices.snapshot() }));

  app.get(PERCEPTION_STREAM_PATH, async (_request, reply) => {
    perception.sse.attach(reply);
  });

  // Open event streams would hold app.close() up; end them (and the consumers' timers) first.
  app.addHook('preClose', async () => {
    perception.stop();
  });
}
