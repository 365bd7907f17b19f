// The perception layer put together: device state, bus, the six consumers and the dashboard stream.
// `ingest(event)` is what POST /api/perception/event calls: the device state is updated first (so a consumer
// reading the robot state sees at least this event), then the event is published.
import { DEFAULT_LIMITS, type Limits } from '../../config/schema.js';
import type { Logger } from '../../util/log.js';
import type { VoiceClient } from '../voice-client.js';
import { type BusOptions, PerceptionBus, type PerceptionEvent } from './bus.js';
import {
  type Clock,
  type Consumers,
  type ConsumersOptions,
  startConsumers,
  type VoiceActions,
  wallClock,
} from './consumers.js';
import { type DeviceStateOptions, DeviceStateStore } from './device-state.js';
import { SseHub, type SseHubOptions } from './sse.js';

export * from './bus.js';
export * from './consumers.js';
export * from './device-state.js';
export * from './routes.js';
export * from './sse.js';

export interface VoiceActionsOptions {
  /** Deadline of each admin call (default 3000 ms; set-face-identified must land well inside 4 s). */
  timeoutMs?: number;
  /** Asset the purr player plays via POST /device/admin/play-asset (default `purr`). */
  purrAsset?: string;
}

/** The consumers' voice calls over the bridge's VoiceClient (POST {VOICE_URL}/device/admin/<route>). */
export function voiceActionsFromClient(
  voice: Pick<VoiceClient, 'post'>,
  options: VoiceActionsOptions = {},
): VoiceActions {
  const timeout = options.timeoutMs ?? 3000;
  const purr = options.purrAsset ?? 'purr';
  return {
    inject: (device_id, text) => voice.post('inject-text', { text, device_id }, timeout),
    abort: (device_id) => voice.post('abort', { device_id }, timeout),
    setHeadAngles: (device_id, yaw, pitch) =>
      voice.post(
        'set-head-angles',
        {
          yaw: Math.round(Math.min(90, Math.max(-90, yaw))),
          pitch: Math.round(Math.min(45, Math.max(-45, pitch))),
          device_id,
        },
        timeout,
      ),
    setFaceIdentified: (device_id) => voice.post('set-face-identified', { device_id }, timeout),
    playPurr: (device_id) => voice.post('play-asset', { name: purr, device_id }, timeout),
  };
}

export interface PerceptionOptions {
  voice: VoiceActions;
  /** Epoch-ms clock for the consumers and the SSE heartbeat (default wallClock). */
  clock?: Clock;
  logger?: Logger;
  /** The kid_mode toggle, passed through to the consumers' state reader. */
  kidMode?: () => boolean;
  consumers?: ConsumersOptions;
  devices?: DeviceStateOptions;
  bus?: BusOptions;
  sse?: SseHubOptions;
  /** Told of every ingested event, synchronously (the metrics count here: a bus subscriber could drop). */
  onIngest?: (event: PerceptionEvent) => void;
  /** Event names streamed to the dashboard (default: every event). */
  streamFilter?: (event: PerceptionEvent) => boolean;
  /** `limits.perception_event_*` and `limits.sse_max_streams_per_address`; missing keys take the defaults. */
  limits?: Partial<Limits>;
}

export interface Perception {
  readonly bus: PerceptionBus;
  readonly devices: DeviceStateStore;
  readonly sse: SseHub;
  readonly consumers: Consumers;
  /** The limits the routes apply (event body, keys, depth). */
  readonly limits: Limits;
  /** Applies the event to the device state, then publishes it. Never throws. */
  ingest(event: PerceptionEvent): void;
  /** Stops the consumers (timers cleared), closes the stream hub and the bus. Idempotent. */
  stop(): void;
}

export function createPerception(options: PerceptionOptions): Perception {
  const clock = options.clock ?? wallClock;
  const logger = options.logger;
  const devices = new DeviceStateStore({ now: () => clock.now(), ...options.devices });
  const bus = new PerceptionBus({ ...(logger ? { logger } : {}), ...options.bus });
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const sse = new SseHub({
    clock,
    maxPerAddress: limits.sse_max_streams_per_address,
    ...(logger ? { logger } : {}),
    welcome: () => [{ event: 'snapshot', data: { devices: devices.snapshot() } }],
    ...options.sse,
  });
  const consumers = startConsumers(
    bus,
    {
      clock,
      voice: options.voice,
      devices: {
        robotState: (id) => devices.robotState(id),
        kidMode: () => options.kidMode?.() ?? false,
      },
      ...(logger ? { logger } : {}),
    },
    options.consumers,
  );
  const filter = options.streamFilter ?? (() => true);
  const unsubscribeStream = bus.subscribe(
    (event) => {
      if (sse.clientCount > 0 && filter(event)) sse.send(event.name, event);
    },
    { name: 'dashboard-stream' },
  );
  let stopped = false;
  return {
    bus,
    devices,
    sse,
    consumers,
    limits,
    ingest(event) {
      if (stopped) return;
      options.onIngest?.(event);
      try {
        devices.apply(event);
      } catch (error) {
        logger?.warn({ err: (error as Error).message, event: event.name }, 'perception state update failed');
      }
      bus.publish(event);
    },
    stop() {
      if (stopped) return;
      stopped = true;
      consumers.stop();
      unsubscribeStream();
      sse.close();
      bus.close();
    },
  };
}
