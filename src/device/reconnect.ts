// Keeping a long-running virtual robot's audio channel open across server restarts.
//
// The real firmware (xiaozhi-esp32 Application::OnAudioChannelClosed) goes idle when the channel closes and opens
// a new one only on the next wake word; a failed open shows an error and waits for the next wake. An emulator
// left running has no one to say the wake word, so it reconnects by itself: after 1 s, then doubling to a 30 s
// cap, until it is back (then the schedule starts over). It does not re-run OTA (the firmware does that only
// on reboot) except when the server refuses the upgrade with 401/403: the OTA token is stale, and a reboot is
// how the device would get a fresh one. `wake()` is the wake word: try at once.
import { ChannelError } from './channel.js';
import type { VirtualRobot } from './robot.js';

export interface Backoff {
  firstDelayMs: number;
  maxDelayMs: number;
}

export const RECONNECT_BACKOFF: Backoff = { firstDelayMs: 1000, maxDelayMs: 30_000 };

/** The wait before the attempt that follows `failures` failed ones: first, doubled each time, capped. */
export function backoffDelayMs(failures: number, backoff: Backoff = RECONNECT_BACKOFF): number {
  // 2 ** 30 is far past any cap; bounding the exponent keeps the arithmetic finite however long it runs.
  return Math.min(backoff.maxDelayMs, backoff.firstDelayMs * 2 ** Math.min(failures, 30));
}

/** The voice server closes an older connection of a device with this when the device connects again. */
export const REPLACED_CLOSE_CODE = 4001;

export type KeeperEvent =
  | { type: 'disconnected'; code: number; retryInMs: number }
  | { type: 'replaced'; code: number }
  | { type: 'retrying'; error: string; retryInMs: number };

export interface KeeperOptions {
  backoff?: Backoff;
  /** What happened, for the console (one line each). */
  report?: (event: KeeperEvent) => void;
}

export class ChannelKeeper {
  private readonly backoff: Backoff;
  private timer: NodeJS.Timeout | undefined;
  private attempt: Promise<boolean> | undefined;
  private failures = 0;
  private needsBoot = false;
  private stopped = true;
  private readonly onDisconnected = (code: number) => {
    if (this.stopped || this.attempt || this.timer) return;
    if (code === REPLACED_CLOSE_CODE) {
      // Another connection with this device id took over (a second robot on the same state folder): reconnecting
      // would take it back and the two would evict each other forever. Wait for a wake instead, as the firmware does.
      this.report({ type: 'replaced', code });
      return;
    }
    const retryInMs = backoffDelayMs(0, this.backoff);
    // The lost channel counts as the first failure: the attempts after it wait 2 s, 4 s, … (not 1 s twice).
    this.failures = 1;
    this.report({ type: 'disconnected', code, retryInMs });
    this.schedule(retryInMs);
  };

  constructor(
    private readonly robot: VirtualRobot,
    private readonly options: KeeperOptions = {},
  ) {
    this.backoff = options.backoff ?? RECONNECT_BACKOFF;
  }

  /** Watches the channel from now on; opens it at once when it is not open (boots first if never booted). */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.robot.on('disconnected', this.onDisconnected);
    if (!this.robot.connected) void this.wake();
  }

  /** The wake word: open the channel now if it is closed. Resolves whether it is open. */
  async wake(): Promise<boolean> {
    if (this.robot.connected) return true;
    if (this.stopped) return false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.attempt ??= this.tryOpen().finally(() => {
      this.attempt = undefined;
    });
    return this.attempt;
  }

  /** No more reconnecting (before a deliberate disconnect, or when the program ends). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.robot.off('disconnected', this.onDisconnected);
  }

  private async tryOpen(): Promise<boolean> {
    // A reboot (server `system reboot`) opens the channel itself; look again once it has had its chance.
    if (this.robot.opening) {
      this.schedule(backoffDelayMs(0, this.backoff));
      return false;
    }
    try {
      if (this.needsBoot || !this.robot.ota) await this.robot.boot();
      await this.robot.connect();
    } catch (error) {
      if (error instanceof ChannelError && (error.status === 401 || error.status === 403))
        this.needsBoot = true;
      const retryInMs = backoffDelayMs(this.failures++, this.backoff);
      if (!this.stopped) {
        this.report({ type: 'retrying', error: (error as Error).message, retryInMs });
        this.schedule(retryInMs);
      }
      return false;
    }
    // The robot's own 'connected' event announces it; the next outage starts the schedule over.
    this.failures = 0;
    this.needsBoot = false;
    return true;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    // Not unref'd: a long-running robot waiting for its server is what keeps the process alive.
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.wake();
    }, delayMs);
  }

  private report(event: KeeperEvent): void {
    this.options.report?.(event);
  }
}
