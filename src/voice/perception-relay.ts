// Relays the device's perception events to the bridge (POST {BRIDGE_URL}/api/perception/event).
// Fire-and-forget through one bounded queue with a small number of posts in flight: a slow or dead bridge
// drops the oldest events (counted) and never delays audio or turns.
import { joinUrl } from '../providers/openai-client.js';
import type { Logger } from '../util/log.js';

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

export class PerceptionRelay {
  private readonly queue: PerceptionEvent[] = [];
  private inFlight = 0;
  private closed = false;
  readonly stats = { relayed: 0, dropped: 0, failed: 0 };

  constructor(private readonly options: RelayOptions) {}

  send(name: string, data: Record<string, unknown>, deviceId: string, sessionId: string): void {
    if (this.closed) return;
    this.queue.push({ name, data, device_id: deviceId, session_id: sessionId, ts: Date.now() / 1000 });
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
      const event = this.queue.shift()!;
      this.inFlight++;
      void this.post(event).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async post(event: PerceptionEvent): Promise<void> {
    try {
      const response = await fetch(joinUrl(this.options.bridgeUrl, 'api/perception/event'), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(event),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 2000),
      });
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.stats.relayed++;
    } catch (error) {
      this.stats.failed++;
      // One line per failure burst would be ideal; debug level keeps a dead bridge from flooding the log.
      this.options.logger.debug(
        { event: event.name, err: (error as Error).message },
        'perception event not relayed',
      );
    }
  }
}
