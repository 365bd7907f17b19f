// The bridge's nine Prometheus metrics (SPEC: GET /metrics). Every label set is bounded: routes are fastify
// route patterns (or `unmatched`), event names come from a fixed list (else `other`), calendar feeds are the
// configured people. A device id or free text never becomes a label.
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { LATENCY_BUCKETS_SEC } from '../util/metrics.js';
import type { Toggles } from '../voice/toggles.js';
import { PERCEPTION_EVENT_NAMES } from './perception/bus.js';

const REQUEST_BUCKETS_SEC = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface BridgeMetricsSources {
  /** Cached ACP sessions of the current agent runtime. */
  acpSessions: () => number;
  /** Perception events dropped by slow subscribers so far (a running total). */
  perceptionDropped: () => number;
}

export class BridgeMetrics {
  readonly registry = new Registry();
  private readonly firstAudio: Histogram;
  private readonly requestDuration: Histogram<'method' | 'route' | 'status_class'>;
  private readonly requestErrors: Counter<'method' | 'route' | 'status'>;
  private readonly toggleChanges: Record<keyof Toggles, Counter<'enabled'>>;
  private readonly perceptionEvents: Counter<'event'>;
  private readonly calendarFailures: Counter<'person'>;
  private readonly knownEvents = new Set<string>(PERCEPTION_EVENT_NAMES);

  constructor(sources: BridgeMetricsSources) {
    const registers = [this.registry];
    this.firstAudio = new Histogram({
      name: 'deskbot_first_audio_latency_seconds',
      help: 'End of the user utterance to the first reply audio frame, as measured by the voice server',
      buckets: LATENCY_BUCKETS_SEC,
      registers,
    });
    this.requestDuration = new Histogram({
      name: 'deskbot_http_request_duration_seconds',
      help: 'Bridge HTTP request duration by route pattern',
      labelNames: ['method', 'route', 'status_class'],
      buckets: REQUEST_BUCKETS_SEC,
      registers,
    });
    this.requestErrors = new Counter({
      name: 'deskbot_http_request_errors_total',
      help: 'Bridge HTTP responses with status >= 400, by route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    new Gauge({
      name: 'deskbot_acp_sessions',
      help: 'Agent sessions the bridge holds open over ACP',
      registers,
      collect() {
        this.set(sources.acpSessions());
      },
    });
    this.toggleChanges = {
      smart_mode: new Counter({
        name: 'deskbot_smart_mode_changes_total',
        help: 'smart_mode flips that landed, by new value',
        labelNames: ['enabled'],
        registers,
      }),
      kid_mode: new Counter({
        name: 'deskbot_kid_mode_changes_total',
        help: 'kid_mode flips that landed, by new value',
        labelNames: ['enabled'],
        registers,
      }),
    };
    this.perceptionEvents = new Counter({
      name: 'deskbot_perception_events_total',
      help: 'Perception events received, by event name (unknown names count as other)',
      labelNames: ['event'],
      registers,
    });
    let droppedSeen = 0;
    new Counter({
      name: 'deskbot_perception_events_dropped_total',
      help: 'Perception events dropped because a consumer queue was full',
      registers,
      collect() {
        const total = sources.perceptionDropped();
        if (total > droppedSeen) this.inc(total - droppedSeen);
        droppedSeen = Math.max(droppedSeen, total);
      },
    });
    this.calendarFailures = new Counter({
      name: 'deskbot_calendar_fetch_failures_total',
      help: 'Calendar feed fetches that failed, by configured person (household for the shared feed)',
      labelNames: ['person'],
      registers,
    });
  }

  observeFirstAudio(seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.firstAudio.observe(seconds);
  }

  toggleChanged(name: keyof Toggles, enabled: boolean): void {
    this.toggleChanges[name].inc({ enabled: String(enabled) });
  }

  perceptionEvent(name: string): void {
    this.perceptionEvents.inc({ event: this.knownEvents.has(name) ? name : 'other' });
  }

  calendarFetchFailed(person: string): void {
    this.calendarFailures.inc({ person });
  }

  /** Times every request by its route pattern; counts the ones that end with a 4xx or 5xx. */
  instrument(app: FastifyInstance): void {
    app.addHook('onResponse', async (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched';
      const method = request.method;
      const status = reply.statusCode;
      this.requestDuration.observe(
        { method, route, status_class: `${Math.floor(status / 100)}xx` },
        reply.elapsedTime / 1000,
      );
      if (status >= 400) this.requestErrors.inc({ method, route, status: String(status) });
    });
  }

  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
