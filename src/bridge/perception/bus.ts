// The bridge's perception bus (SPEC "Events" 2): the voice server posts each device event to the bridge,
// which publishes it here. Every subscriber has its own bounded queue drained in order by its own async
// loop, so a slow, hung or throwing subscriber never blocks the publisher or the other subscribers; when a
// subscriber's queue is full the oldest event is dropped and counted. `publish` never throws.
import { z } from 'zod';
import { DEFAULT_LIMITS } from '../../config/schema.js';
import { canonicalDeviceId } from '../../protocol/index.js';
import { HttpError } from '../../util/http-error.js';
import { type Logger, silentLogger, ThrottledLog } from '../../util/log.js';

/** SPEC "Perception event record (voice server to bridge)". */
export interface PerceptionEvent {
  name: string;
  data: Record<string, unknown>;
  device_id: string;
  session_id: string;
  /** Epoch seconds, fractional. */
  ts: number;
}

/** Event names the bridge reacts to; the list is open-ended (unknown names are published too). */
export const PERCEPTION_EVENT_NAMES = [
  'face_detected',
  'face_lost',
  'sound_event',
  'state_changed',
  'dance_started',
  'dance_ended',
  'chat_status',
  'face_recognized',
  'head_pet_started',
  'head_pet_ended',
  'wake_word_detected',
] as const;
export type KnownPerceptionEventName = (typeof PERCEPTION_EVENT_NAMES)[number];

export const perceptionEventSchema = z.object({
  name: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits and _ . : - only'),
  data: z.record(z.string(), z.unknown()).default({}),
  device_id: z.string().min(1).max(128).transform(canonicalDeviceId),
  session_id: z.string().max(200).default(''),
  ts: z.number().finite().nonnegative().optional(),
});

/** Bounds on an event's `data`, checked before zod sees it (90,000 keys once took 1.18 s to validate). */
export interface EventShapeLimits {
  /** Keys and array items on every level together. */
  maxKeys: number;
  /** Objects and arrays inside `data`, `data` itself being depth 1. */
  maxDepth: number;
}

const DEFAULT_SHAPE: EventShapeLimits = {
  maxKeys: DEFAULT_LIMITS.perception_event_max_keys,
  maxDepth: DEFAULT_LIMITS.perception_event_max_depth,
};

/**
 * Validates a posted record (the body of POST /api/perception/event). A missing `ts` becomes "now".
 * Throws HttpError 400 `invalid_body` naming the first bad field, 413 `body_too_complex` past the shape limits.
 */
export function parsePerceptionEvent(
  body: unknown,
  nowMs: number = Date.now(),
  shape: EventShapeLimits = DEFAULT_SHAPE,
): PerceptionEvent {
  checkShape((body as { data?: unknown } | null)?.data, shape);
  const result = perceptionEventSchema.safeParse(body ?? {});
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new HttpError(
      400,
      'invalid_body',
      `${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid'}`,
    );
  }
  const { ts, ...rest } = result.data;
  return { ...rest, ts: ts ?? nowMs / 1000 };
}

/** Walks `data` with a budget: stops at the first key or level over the limits, so the cost is bounded. */
function checkShape(data: unknown, limits: EventShapeLimits): void {
  let keys = 0;
  const visit = (value: unknown, depth: number): void => {
    if (typeof value !== 'object' || value === null) return;
    if (depth > limits.maxDepth) {
      throw new HttpError(413, 'body_too_complex', `data: nested deeper than ${limits.maxDepth} levels`);
    }
    const children = Array.isArray(value) ? value : Object.values(value);
    keys += children.length;
    if (keys > limits.maxKeys) {
      throw new HttpError(413, 'body_too_complex', `data: more than ${limits.maxKeys} keys and items`);
    }
    for (const child of children) visit(child, depth + 1);
  };
  visit(data, 1);
}

export type PerceptionHandler = (event: PerceptionEvent) => void | Promise<void>;

export interface SubscribeOptions {
  /** Queue bound for this subscriber (default: the bus's `defaultMaxQueue`, 256). */
  maxQueue?: number;
  /** Shown in stats and logs. */
  name?: string;
}

export interface SubscriberStats {
  name: string;
  queued: number;
  delivered: number;
  /** Events dropped because the queue was full (oldest first). */
  dropped: number;
  /** Handler calls that threw or rejected. */
  failed: number;
}

export interface BusStats {
  published: number;
  dropped: number;
  subscribers: SubscriberStats[];
}

export interface BusOptions {
  logger?: Logger;
  defaultMaxQueue?: number;
}

interface Subscriber extends Omit<SubscriberStats, 'queued'> {
  readonly handler: PerceptionHandler;
  readonly maxQueue: number;
  readonly queue: PerceptionEvent[];
  running: boolean;
  active: boolean;
}

let anonymous = 0;

export class PerceptionBus {
  private readonly subscribers = new Set<Subscriber>();
  private readonly log: ThrottledLog;
  private readonly defaultMaxQueue: number;
  private idleWaiters: Array<() => void> = [];
  private published = 0;
  private droppedTotal = 0;

  constructor(options: BusOptions = {}) {
    this.log = new ThrottledLog(options.logger ?? silentLogger);
    this.defaultMaxQueue = positiveInt(options.defaultMaxQueue, 256);
  }

  /** Adds a subscriber; the returned function removes it (its queued events are discarded). */
  subscribe(handler: PerceptionHandler, options: SubscribeOptions = {}): () => void {
    const subscriber: Subscriber = {
      name: options.name ?? `subscriber-${++anonymous}`,
      handler,
      maxQueue: positiveInt(options.maxQueue, this.defaultMaxQueue),
      queue: [],
      running: false,
      active: true,
      delivered: 0,
      dropped: 0,
      failed: 0,
    };
    this.subscribers.add(subscriber);
    return () => {
      if (!subscriber.active) return;
      subscriber.active = false;
      subscriber.queue.length = 0;
      this.subscribers.delete(subscriber);
      this.checkIdle();
    };
  }

  /** Queues the event for every subscriber and returns at once; handlers run later, never inside this call. */
  publish(event: PerceptionEvent): void {
    try {
      this.published++;
      for (const subscriber of this.subscribers) {
        subscriber.queue.push(event);
        while (subscriber.queue.length > subscriber.maxQueue) {
          subscriber.queue.shift();
          subscriber.dropped++;
          this.droppedTotal++;
          this.log.warn(
            { subscriber: subscriber.name, dropped: subscriber.dropped },
            'perception subscriber too slow; dropped its oldest event',
          );
        }
        if (!subscriber.running) {
          subscriber.running = true;
          queueMicrotask(() => void this.run(subscriber));
        }
      }
    } catch (error) {
      // Nothing above should throw; if it does, the publisher (an HTTP route) must not see it.
      this.log.warn({ err: (error as Error)?.message }, 'perception publish failed');
    }
  }

  stats(): BusStats {
    return {
      published: this.published,
      dropped: this.droppedTotal,
      subscribers: [...this.subscribers].map((s) => ({
        name: s.name,
        queued: s.queue.length,
        delivered: s.delivered,
        dropped: s.dropped,
        failed: s.failed,
      })),
    };
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /**
   * Resolves when every subscriber's queue is empty and its handler has returned (or at once). A subscriber
   * whose handler never settles keeps this pending: tests use it with fast subscribers only.
   */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Removes every subscriber. */
  close(): void {
    for (const subscriber of this.subscribers) {
      subscriber.active = false;
      subscriber.queue.length = 0;
    }
    this.subscribers.clear();
    this.checkIdle();
  }

  private async run(subscriber: Subscriber): Promise<void> {
    while (subscriber.active && subscriber.queue.length > 0) {
      const event = subscriber.queue.shift()!;
      try {
        await subscriber.handler(event);
        subscriber.delivered++;
      } catch (error) {
        subscriber.failed++;
        this.log.warn(
          { subscriber: subscriber.name, event: event.name, err: (error as Error)?.message ?? String(error) },
          'perception subscriber failed',
        );
      }
    }
    subscriber.running = false;
    this.checkIdle();
  }

  private isIdle(): boolean {
    for (const subscriber of this.subscribers) {
      if (subscriber.running || subscriber.queue.length > 0) return false;
    }
    return true;
  }

  private checkIdle(): void {
    if (this.idleWaiters.length === 0 || !this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }
}

function positiveInt(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value >= 1 ? Math.floor(value) : fallback;
}
