// Activation-Version 2 devices: the OTA response carries a challenge; the device answers it on
// /device/ota/activate with HMAC-SHA256(key, challenge) computed with its eFuse key.
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from '../util/atomic-file.js';

interface Pending {
  challenge: string;
  code: string;
  createdAt: number;
}

export type ActivateOutcome = 'nothing_pending' | 'waiting' | 'activated' | 'refused';

export class ActivationService {
  private readonly pending = new Map<string, Pending>();
  private readonly activated: Record<string, number>;
  private readonly key: Buffer;

  constructor(
    hmacKey: string,
    private readonly statePath: string,
  ) {
    // A 64-hex-digit key is the raw 32-byte eFuse key; anything else is used as UTF-8 bytes.
    this.key = /^[0-9a-f]{64}$/i.test(hmacKey) ? Buffer.from(hmacKey, 'hex') : Buffer.from(hmacKey, 'utf8');
    this.activated = existsSync(statePath) ? safeParse(readFileSync(statePath, 'utf8')) : {};
  }

  get enabled(): boolean {
    return this.key.length > 0;
  }

  isActivated(deviceId: string): boolean {
    return deviceId in this.activated;
  }

  /** The challenge for a device that still needs activation (the same one until it is answered). */
  challengeFor(deviceId: string): Pending | undefined {
    if (!this.enabled || this.isActivated(deviceId)) return undefined;
    let entry = this.pending.get(deviceId);
    if (!entry) {
      entry = {
        challenge: randomBytes(16).toString('hex'),
        code: String(randomInt(0, 1_000_000)).padStart(6, '0'),
        createdAt: Date.now(),
      };
      this.pending.set(deviceId, entry);
    }
    return entry;
  }

  expectedHmac(challenge: string): string {
    return createHmac('sha256', this.key).update(challenge).digest('hex');
  }

  async activate(deviceId: string, hmac: string | undefined): Promise<ActivateOutcome> {
    const entry = this.pending.get(deviceId);
    if (!entry) return 'nothing_pending';
    if (!hmac) return 'waiting';
    const expected = Buffer.from(this.expectedHmac(entry.challenge));
    const given = Buffer.from(hmac.toLowerCase());
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return 'refused';
    this.pending.delete(deviceId);
    this.activated[deviceId] = Date.now();
    await writeFileAtomic(this.statePath, JSON.stringify(this.activated, null, 2));
    return 'activated';
  }
}

function safeParse(text: string): Record<string, number> {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null ? (value as Record<string, number>) : {};
  } catch {
    return {};
  }
}
