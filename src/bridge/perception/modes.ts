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

/** Security mode: periodic capture into DATA_DIR/journal/security-YYYY-MM-DD.md. */
export class SecurityWatch {
  private readonly timers = new Map<string, unknown>();
  readonly journalled: Array<{ deviceId: string; text: string }> = [];

  constructor(
    private readonly clock: Clock,
    private readonly actions: ModeActions,
    private readonly options: SecurityOptions,
    private readonly logger?: Logger,
  ) {}

  subscribe(bus: PerceptionBus): () => void {
    const unsubscribe = bus.subscribe((event) => this.handle(event), { name: 'security-watch' });
    return () => {
      unsubscribe();
      this.stop();
    };
  }

  handle(event: PerceptionEvent): void {
    const to = enteredState(event);
    if (to === undefined) return;
    if (to === 'security') {
      this.capture(event.device_id);
    } else {
      this.clear(event.device_id);
    }
  }

  stop(): void {
    for (const id of [...this.timers.keys()]) this.clear(id);
  }

  private capture(deviceId: string): void {
    this.clear(deviceId);
    void this.journal(deviceId);
    const handle = this.clock.setTimer(() => this.capture(deviceId), this.options.intervalMs ?? 60_000);
    (handle as { unref?: () => void })?.unref?.();
    this.timers.set(deviceId, handle);
  }

  private clear(deviceId: string): void {
    const handle = this.timers.get(deviceId);
    if (handle !== undefined) this.clock.clearTimer(handle);
    this.timers.delete(deviceId);
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
export class StorySilence {
  private readonly timers = new Map<string, unknown>();

  constructor(
    private readonly clock: Clock,
    private readonly actions: ModeActions,
    private readonly silenceMs = 90_000,
  ) {}

  subscribe(bus: PerceptionBus): () => void {
    const unsubscribe = bus.subscribe((event) => this.handle(event), { name: 'story-silence' });
    return () => {
      unsubscribe();
      this.stop();
    };
  }

  handle(event: PerceptionEvent): void {
    const to = enteredState(event);
    if (to === 'story_time') this.arm(event.device_id);
    else if (to !== undefined) this.clear(event.device_id);
    else if (
      (event.name === 'chat_status' || event.name === 'wake_word_detected') &&
      this.timers.has(event.device_id)
    ) {
      this.arm(event.device_id); // any conversation activity restarts the silence
    }
  }

  stop(): void {
    for (const id of [...this.timers.keys()]) this.clear(id);
  }

  private arm(deviceId: string): void {
    this.clear(deviceId);
    const handle = this.clock.setTimer(() => {
      this.timers.delete(deviceId);
      void this.actions.setState(deviceId, 'idle').catch(() => undefined);
    }, this.silenceMs);
    (handle as { unref?: () => void })?.unref?.();
    this.timers.set(deviceId, handle);
  }

  private clear(deviceId: string): void {
    const handle = this.timers.get(deviceId);
    if (handle !== undefined) this.clock.clearTimer(handle);
    this.timers.delete(deviceId);
  }
}
