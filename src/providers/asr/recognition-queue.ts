// The queue in front of a pool of recognisers (decoders): per-device lanes served round-robin, so one
// device's backlog cannot hold the others' utterances; a cancelled job leaves the queue at once and never
// reaches a worker; and the queue is bounded, refusing (with a counted reason) what it cannot hold.
//
// What a submitted job's promise does:
//   - resolves or rejects with what the worker returned, once it ran;
//   - rejects with an AbortError (DOMException) when its signal aborted before a worker took it (also
//     when the signal was aborted already at submit): the job never started;
//   - rejects with a RecognitionRefusedError when the queue was full, a newer job of the same device
//     superseded it, or the queue was closed.
import { availableParallelism } from 'node:os';

export interface RecognitionQueueOptions {
  /** Jobs that may run at once: one per decoder. */
  workers: number;
  /** Jobs waiting for a worker, all devices together; a job beyond it is refused ('full'). */
  maxQueued: number;
  /** Jobs one device may have waiting; a newer job replaces its oldest ('superseded'). Jobs without a
   *  device id are not limited this way: nothing says they come from one speaker. */
  maxQueuedPerDevice: number;
}

/** Each busy decoder holds one libuv worker thread (koffi's async calls run there); leave one free for the
 *  other async native calls (espeak-ng synthesis) and file I/O, which would otherwise wait behind decodes. */
const THREADPOOL_SIZE = Number(process.env.UV_THREADPOOL_SIZE) || 4;

/** The defaults in one place. 32 waiting jobs at ≈0.5–1 s each over 2 decoders is already 8–16 s of wait at
 *  the tail: a longer queue would only answer people who have given up. */
export const RECOGNITION_QUEUE_DEFAULTS: RecognitionQueueOptions = {
  workers: Math.max(1, Math.min(availableParallelism(), THREADPOOL_SIZE - 1)),
  maxQueued: 32,
  maxQueuedPerDevice: 1,
};

export type RefusalReason = 'full' | 'superseded' | 'closed';
export const REFUSAL_REASONS: readonly RefusalReason[] = ['full', 'superseded', 'closed'];

export class RecognitionRefusedError extends Error {
  override readonly name = 'RecognitionRefusedError';
  constructor(readonly reason: RefusalReason) {
    super(
      reason === 'full'
        ? 'speech recognition queue is full: utterance refused'
        : reason === 'superseded'
          ? 'a newer utterance from the same device replaced this one in the recognition queue'
          : 'speech recognition is shut down',
    );
  }
}

export interface RecognitionQueueStats {
  /** Workers that may run at once (the pool size). */
  workers: number;
  /** Jobs running on a worker now. */
  running: number;
  /** Jobs waiting for a worker now. */
  queued: number;
  /** Jobs handed to a worker, ever. */
  started: number;
  /** Jobs whose signal aborted before a worker took them: they never started. */
  cancelled: number;
  /** Jobs refused or removed unstarted, by reason. */
  dropped: Record<RefusalReason, number>;
}

/** Runs one job on worker `worker` (0 ≤ worker < workers, never two jobs on one worker at once). */
export type RunOnWorker<J, R> = (job: J, worker: number, signal: AbortSignal) => Promise<R>;

interface Entry<J, R> {
  job: J;
  lane: string;
  signal: AbortSignal;
  resolve(value: R): void;
  reject(error: unknown): void;
  onAbort(): void;
}

const ANONYMOUS = '';

export class RecognitionQueue<J, R> {
  private readonly options: RecognitionQueueOptions;
  /** Waiting jobs per device, oldest first; the map keeps the devices in the order they began waiting. */
  private readonly lanes = new Map<string, Entry<J, R>[]>();
  /** Devices with a job waiting or running: when their latest job started, and how many run now. Kept
   *  only while the device has work here, so it is bounded by workers + maxQueued. */
  private readonly served = new Map<string, { startedSeq: number; running: number }>();
  private readonly busy: boolean[];
  private queued = 0;
  private closed = false;
  private readonly counts = {
    started: 0,
    cancelled: 0,
    dropped: { full: 0, superseded: 0, closed: 0 } as Record<RefusalReason, number>,
  };

  constructor(
    private readonly run: RunOnWorker<J, R>,
    options: Partial<RecognitionQueueOptions> = {},
  ) {
    this.options = { ...RECOGNITION_QUEUE_DEFAULTS, ...options };
    const { workers, maxQueued, maxQueuedPerDevice } = this.options;
    if (![workers, maxQueued, maxQueuedPerDevice].every(Number.isInteger) || workers < 1 || maxQueued < 0)
      throw new Error('recognition queue: workers must be a whole number ≥ 1, maxQueued ≥ 0');
    if (maxQueuedPerDevice < 1) throw new Error('recognition queue: maxQueuedPerDevice must be ≥ 1');
    this.busy = Array.from({ length: workers }, () => false);
  }

  submit(job: J, signal: AbortSignal, deviceId?: string): Promise<R> {
    if (this.closed) return Promise.reject(this.refuse('closed'));
    if (signal.aborted) {
      this.counts.cancelled++;
      return Promise.reject(abortError());
    }
    return new Promise<R>((resolve, reject) => {
      const lane = deviceId || ANONYMOUS;
      const entry: Entry<J, R> = {
        job,
        lane,
        signal,
        resolve,
        reject,
        onAbort: () => {
          if (!this.remove(entry)) return;
          this.counts.cancelled++;
          reject(abortError());
        },
      };
      const waiting = this.lanes.get(lane);
      // The turn machine cancels a device's previous recognition itself; this catches callers that do not.
      const superseded =
        lane !== ANONYMOUS && waiting && waiting.length >= this.options.maxQueuedPerDevice
          ? waiting[0]
          : undefined;
      // Jobs wait only while every worker is busy, so a free worker means an empty queue: maxQueued 0 serves.
      if (!superseded && this.queued >= this.options.maxQueued && this.freeWorker() < 0) {
        reject(this.refuse('full'));
        return;
      }
      signal.addEventListener('abort', entry.onAbort, { once: true });
      if (waiting) waiting.push(entry);
      else this.lanes.set(lane, [entry]);
      this.queued++;
      // Removed after the newer job joined, so the device keeps its place in the line.
      if (superseded) {
        this.remove(superseded);
        superseded.reject(this.refuse('superseded'));
      }
      this.pump();
    });
  }

  stats(): RecognitionQueueStats {
    return {
      workers: this.options.workers,
      running: this.busy.filter(Boolean).length,
      queued: this.queued,
      started: this.counts.started,
      cancelled: this.counts.cancelled,
      dropped: { ...this.counts.dropped },
    };
  }

  /** Refuses new jobs and the waiting ones; running jobs finish. */
  close(): void {
    this.closed = true;
    for (const waiting of [...this.lanes.values()]) {
      for (const entry of [...waiting]) {
        this.remove(entry);
        entry.reject(this.refuse('closed'));
      }
    }
  }

  /** Takes a waiting entry out (started, cancelled or refused); false when it was not waiting. */
  private remove(entry: Entry<J, R>): boolean {
    const waiting = this.lanes.get(entry.lane);
    const index = waiting ? waiting.indexOf(entry) : -1;
    if (!waiting || index < 0) return false;
    waiting.splice(index, 1);
    entry.signal.removeEventListener('abort', entry.onAbort);
    this.queued--;
    if (waiting.length === 0) {
      this.lanes.delete(entry.lane);
      if (this.served.get(entry.lane)?.running === 0) this.served.delete(entry.lane);
    }
    return true;
  }

  /** Lowest free worker first, so a pool that loads its workers lazily grows only under concurrency. */
  private freeWorker(): number {
    return this.busy.indexOf(false);
  }

  /** Least recently served device first (never served: first), ties in the order devices began waiting:
   *  round-robin, where a device that just had a job started goes to the back of the line. */
  private nextLane(): string | undefined {
    let best: string | undefined;
    let bestSeq = Number.POSITIVE_INFINITY;
    for (const lane of this.lanes.keys()) {
      const seq = this.served.get(lane)?.startedSeq ?? -1;
      if (seq < bestSeq) {
        best = lane;
        bestSeq = seq;
      }
    }
    return best;
  }

  private pump(): void {
    for (let worker = this.freeWorker(); worker >= 0; worker = this.freeWorker()) {
      const lane = this.nextLane();
      if (lane === undefined) return;
      const entry = this.lanes.get(lane)![0]!;
      const served = this.served.get(lane);
      this.served.set(lane, { startedSeq: this.counts.started, running: (served?.running ?? 0) + 1 });
      this.remove(entry);
      this.start(entry, worker);
    }
  }

  private start(entry: Entry<J, R>, worker: number): void {
    this.busy[worker] = true;
    this.counts.started++;
    let running: Promise<R>;
    try {
      running = this.run(entry.job, worker, entry.signal);
    } catch (error) {
      running = Promise.reject(error);
    }
    running.then(entry.resolve, entry.reject).finally(() => {
      this.busy[worker] = false;
      const served = this.served.get(entry.lane);
      if (served && --served.running === 0 && !this.lanes.has(entry.lane)) this.served.delete(entry.lane);
      this.pump();
    });
  }

  private refuse(reason: RefusalReason): RecognitionRefusedError {
    this.counts.dropped[reason]++;
    return new RecognitionRefusedError(reason);
  }
}

function abortError(): DOMException {
  return new DOMException('speech recognition was cancelled before it started', 'AbortError');
}
