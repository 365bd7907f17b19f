// Posts the voice server's records to the bridge: perception events (POST {BRIDGE_URL}/api/perception/event)
// and turn reports (POST {BRIDGE_URL}/api/voice/turn). Fire-and-forget through one bounded queue with a small
// number of posts in flight: a slow or dead bridge drops the oldest records (counted) and never delays audio
// or turns.
import { joinUrl } from '../providers/openai-client.js';
import type { Logger } from '../util/log.js';
import type { TurnReport } from './metrics.js';

export interface PerceptionEvent {
  name: string;
  data: Record<string, unknown>;
  device_id: string;
  session_id: string;
  /** Epoch seconds, fractional. */
  ts: number;
}

export interface RelayOptions {
  bridgeUrl: string;
  logger: Logger;
  maxQueue?: number;
  concurrency?: number;
  timeoutMs?: number;
}

export class BridgeRelay<T> {
  private readonly queue: T[] = [];
  private inFlight = 0;
  private closed = false;
  readonly stats = { relayed: 0, dropped: 0, failed: 0 };

  constructor(
    private readonly options: RelayOptions,
    /** Path under the bridge URL, e.g. `api/voice/turn`. */
    private readonly path: string,
    /** What a failure log line calls the record. */
    private readonly describe: (record: T) => string,
  ) {}

  enqueue(record: T): void {
    if (this.closed) return;
    this.queue.push(record);
    const max = this.options.maxQueue ?? 500;
    while (this.queue.length > max) {
      this.queue.shift();
      this.stats.dropped++;
    }
    this.pump();
  }

  get pending(): number {
    return this.queue.length + this.inFlight;
  }

  close(): void {
    this.closed = true;
    this.queue.length = 0;
  }

  private pump(): void {
    while (this.inFlight < (this.options.concurrency ?? 4) && this.queue.length > 0) {
      const record = this.queue.shift()!;
      this.inFlight++;
      void this.post(record).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async post(record: T): Promise<void> {
    try {
      const response = await fetch(joinUrl(this.options.bridgeUrl, this.path), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(record),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 2000),
      });
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.stats.relayed++;
    } catch (error) {
      this.stats.failed++;
      // Debug level: a dead bridge must not flood the log with one line per record.
      this.options.logger.debug(
        { record: this.describe(record), path: this.path, err: (error as Error).message },
        'record not relayed to the bridge',
      );
    }
  }
}

export class PerceptionRelay extends BridgeRelay<PerceptionEvent> {
  constructor(options: RelayOptions) {
    super(options, 'api/perception/event', (event) => event.name);
  }

  send(name: string, data: Record<string, unknown>, deviceId: string, sessionId: string): void {
    this.enqueue({ name, data, device_id: deviceId, session_id: sessionId, ts: Date.now() / 1000 });
  }
}

export class TurnRelay extends BridgeRelay<TurnReport> {
  constructor(options: RelayOptions) {
    super(options, 'api/voice/turn', (report) => `turn ${report.turn_id} of ${report.device_id}`);
  }
}
