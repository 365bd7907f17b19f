// The bridge's part of two robot modes, driven by state_changed events:
// - security: a photo on entry and then periodically; each description is appended to a journal under DATA_DIR.
// - story_time: 90 s without any chat activity returns the robot to idle.
// Both take their clock and their voice-server calls as parameters, like the other consumers.
import { appendFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../../audio/pacer.js';
import type { Logger } from '../../util/log.js';
import type { PerceptionBus, PerceptionEvent } from './bus.js';

export interface ModeActions {
  /** Takes a photo on the device and returns the description (or why there is none). */
  describePhoto(deviceId: string, question: string): Promise<string>;
  /** Captions the last seconds the device's microphone sent (or says why there is no caption). */
  captionSound(deviceId: string): Promise<string>;
  setState(deviceId: string, state: 'idle'): Promise<void>;
}

export interface SecurityOptions {
  journalDir: string;
  /** Between photos while in security (default 60 s). */
  intervalMs?: number;
}

function localStamp(ms: number): { date: string; time: string } {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, '0');
  return {
    date: `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`,
    time: `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`,
  };
}

const enteredState = (event: PerceptionEvent): string | undefined =>
  event.name === 'state_changed' && typeof event.data.to === 'string' ? event.data.to : undefined;

/** One timer per device on the mode's clock, and the subscribe/stop life cycle both modes share. */
abstract class ModeWatcher {
  private readonly timers = new Map<string, unknown>();

  constructor(
    protected readonly clock: Clock,
    private readonly name: string,
  ) {}

  subscribe(bus: PerceptionBus): () => void {
    const unsubscribe = bus.subscribe((event) => this.handle(event), { name: this.name });
    return () => {
      unsubscribe();
      this.stop();
    };
  }

  abstract handle(event: PerceptionEvent): void;

  stop(): void {
    for (const id of [...this.timers.keys()]) this.clear(id);
  }

  protected armed(deviceId: string): boolean {
    return this.timers.has(deviceId);
  }

  /** (Re)starts the device's timer. */
  protected arm(deviceId: string, ms: number, callback: () => void): void {
    this.clear(deviceId);
    const handle = this.clock.setTimer(() => {
      this.timers.delete(deviceId);
      callback();
    }, ms);
    (handle as { unref?: () => void })?.unref?.();
    this.timers.set(deviceId, handle);
  }

  protected clear(deviceId: string): void {
    const handle = this.timers.get(deviceId);
    if (handle !== undefined) this.clock.clearTimer(handle);
    this.timers.delete(deviceId);
  }
}

/** Security mode: periodic capture into DATA_DIR/journal/security-YYYY-MM-DD.md. */
export class SecurityWatch extends ModeWatcher {
  readonly journalled: Array<{ deviceId: string; text: string }> = [];

  constructor(
    clock: Clock,
    private readonly actions: ModeActions,
    private readonly options: SecurityOptions,
    private readonly logger?: Logger,
  ) {
    super(clock, 'security-watch');
  }

  handle(event: PerceptionEvent): void {
    const to = enteredState(event);
    if (to === 'security') this.capture(event.device_id);
    else if (to !== undefined) this.clear(event.device_id);
  }

  /** A capture now, and the next one after the interval (until the robot leaves security). */
  private capture(deviceId: string): void {
    void this.journal(deviceId);
    this.arm(deviceId, this.options.intervalMs ?? 60_000, () => this.capture(deviceId));
  }

  private async journal(deviceId: string): Promise<void> {
    const attempt = async (what: string, run: () => Promise<string>) => {
      try {
        return (await run()).replace(/\s+/g, ' ').trim();
      } catch (error) {
        return `(no ${what}: ${(error as Error).message})`;
      }
    };
    const text = await attempt('photo', () =>
      this.actions.describePhoto(
        deviceId,
        'You are a security camera. Briefly describe the room and anyone in it.',
      ),
    );
    const sound = await attempt('sound', () => this.actions.captionSound(deviceId));
    const { date, time } = localStamp(this.clock.now());
    const line = `- ${time} · ${deviceId} · photo: ${text} · sound: ${sound}\n`;
    try {
      await mkdir(this.options.journalDir, { recursive: true });
      await appendFile(join(this.options.journalDir, `security-${date}.md`), line);
      this.journalled.push({ deviceId, text: `${text} / ${sound}` });
    } catch (error) {
      this.logger?.error({ err: (error as Error).message }, 'security journal write failed');
    }
  }
}

/** Story time ends after this long without chat activity (SPEC: 90 s). */
export class StorySilence extends ModeWatcher {
  constructor(
    clock: Clock,
    private readonly actions: ModeActions,
    private readonly silenceMs = 90_000,
  ) {
    super(clock, 'story-silence');
  }

  handle(event: PerceptionEvent): void {
    const to = enteredState(event);
    const activity = event.name === 'chat_status' || event.name === 'wake_word_detected';
    // Entering story time starts the silence; any conversation activity restarts it.
    if (to === 'story_time' || (to === undefined && activity && this.armed(event.device_id))) {
      this.arm(event.device_id, this.silenceMs, () => {
        void this.actions.setState(event.device_id, 'idle').catch(() => undefined);
      });
    } else if (to !== undefined) {
      this.clear(event.device_id);
    }
  }
}
