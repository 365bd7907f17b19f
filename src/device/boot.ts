// The firmware's boot sequence against the OTA endpoint: the check request (with retries and
// exponential backoff), activation, and the two-partition firmware update with rollback.
import { createHmac } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { OtaResponse } from '../protocol/index.js';
import { compareVersions } from '../protocol/index.js';

export type PartitionLabel = 'ota_0' | 'ota_1';

export interface FlashState {
  running: PartitionLabel;
  partitions: Record<PartitionLabel, { version: string; image: 'valid' | 'invalid' | 'empty' }>;
}

export interface BootIdentity {
  deviceId: string;
  clientId: string;
  boardType: string;
  appName: string;
  language: string;
  serialNumber?: string;
  /** eFuse HMAC key for Activation-Version 2 devices (hex of 32 bytes, or text). */
  hmacKey?: string;
}

export interface BootOptions {
  otaUrl: string;
  identity: BootIdentity;
  flash: FlashState;
  /** First retry delay; the firmware uses 10 s and doubles it each time. */
  retryBaseMs: number;
  maxAttempts: number;
  /** Activation polling: interval and attempts while the server answers 202. */
  activationPollMs: number;
  activationAttempts: number;
  fetchTimeoutMs: number;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  log: (message: string, fields?: Record<string, unknown>) => void;
  signal?: AbortSignal;
}

/** ESP32 application images start with this magic byte; the bootloader refuses anything else. */
export const ESP_IMAGE_MAGIC = 0xe9;

export function runningVersion(flash: FlashState): string {
  return flash.partitions[flash.running].version;
}

export function otherPartition(label: PartitionLabel): PartitionLabel {
  return label === 'ota_0' ? 'ota_1' : 'ota_0';
}

export function bootRequest(options: Pick<BootOptions, 'identity' | 'flash'>): {
  headers: Record<string, string>;
  body: Record<string, unknown>;
} {
  const { identity, flash } = options;
  const version = runningVersion(flash);
  const headers: Record<string, string> = {
    'User-Agent': `${identity.boardType}/${version}`,
    'Content-Type': 'application/json',
    'Device-Id': identity.deviceId,
    'Client-Id': identity.clientId,
    'Activation-Version': identity.serialNumber ? '2' : '1',
    'Accept-Language': identity.language,
  };
  if (identity.serialNumber) headers['Serial-Number'] = identity.serialNumber;
  const body = {
    version: 2,
    language: identity.language,
    flash_size: 16 * 1024 * 1024,
    minimum_free_heap_size: '7265024',
    mac_address: identity.deviceId,
    uuid: identity.clientId,
    chip_model_name: 'esp32s3',
    chip_info: { model: 9, cores: 2, revision: 2, features: 18 },
    application: {
      name: identity.appName,
      version,
      compile_time: 'Nov 21 2026T12:00:00Z',
      idf_version: 'v5.4.1',
      elf_sha256: '0'.repeat(64),
    },
    partition_table: [
      { label: 'nvs', type: 1, subtype: 2, address: 0x9000, size: 0x4000 },
      { label: 'otadata', type: 1, subtype: 0, address: 0xd000, size: 0x2000 },
      { label: 'phy_init', type: 1, subtype: 1, address: 0xf000, size: 0x1000 },
      { label: 'ota_0', type: 0, subtype: 16, address: 0x20000, size: 0x3f0000 },
      { label: 'ota_1', type: 0, subtype: 17, address: 0x410000, size: 0x3f0000 },
    ],
    ota: { label: flash.running },
    display: { monochrome: false, width: 240, height: 240 },
    board: {
      type: identity.boardType,
      name: identity.boardType,
      ssid: 'deskbot-lab',
      rssi: -48,
      channel: 6,
      ip: '127.0.0.1',
      mac: identity.deviceId,
    },
  };
  return { headers, body };
}

export interface BootSettings {
  otaUrl: string;
  identity: Omit<BootIdentity, 'appName' | 'language'>;
  flash: FlashState;
  /** Default 10 s, doubling: the firmware's OTA retry (emulators and tests shorten it). */
  retryBaseMs?: number;
  /** Default 10, as the firmware. */
  maxAttempts?: number;
  log: BootOptions['log'];
  signal?: AbortSignal;
}

/** The firmware's boot options; only the retry schedule may differ from the device's. */
export function firmwareBootOptions(settings: BootSettings): BootOptions {
  const { retryBaseMs, maxAttempts, identity, signal, ...rest } = settings;
  return {
    ...rest,
    identity: { ...identity, appName: 'xiaozhi', language: 'en-US' },
    retryBaseMs: retryBaseMs ?? 10_000,
    maxAttempts: maxAttempts ?? 10,
    activationPollMs: Math.min(3000, retryBaseMs ?? 3000),
    activationAttempts: 10,
    fetchTimeoutMs: 10_000,
    sleep: (ms, s) => delay(ms, undefined, s ? { signal: s } : {}),
    ...(signal ? { signal } : {}),
  };
}

export class BootError extends Error {}

/** The check request, retried up to maxAttempts with exponential backoff (non-200 or non-JSON = failure). */
export async function checkVersion(options: BootOptions): Promise<OtaResponse> {
  const { headers, body } = bootRequest(options);
  let delayMs = options.retryBaseMs;
  let lastError = '';
  for (let attempt = 1; attempt <= options.maxAttempts; attempt++) {
    try {
      const response = await fetch(options.otaUrl, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: timeoutSignal(options.fetchTimeoutMs, options.signal),
      });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${text.slice(0, 200)}`);
      const parsed = JSON.parse(text) as unknown;
      if (typeof parsed !== 'object' || parsed === null) throw new Error('response is not a JSON object');
      return parsed as OtaResponse;
    } catch (error) {
      if (options.signal?.aborted) throw new BootError('boot aborted');
      // fetch says only "fetch failed"; the cause names what happened (ECONNREFUSED, a DNS failure…).
      const cause = (error as Error).cause as Error | undefined;
      lastError = cause?.message
        ? `${(error as Error).message} (${cause.message})`
        : (error as Error).message;
      const last = attempt === options.maxAttempts;
      options.log('boot check failed', {
        attempt,
        error: lastError,
        ...(last ? {} : { retryInMs: delayMs }),
      });
      if (!last) {
        await options.sleep(delayMs, options.signal);
        delayMs *= 2;
      }
    }
  }
  const tries = options.maxAttempts > 1 ? ` ${options.maxAttempts} times; last error` : '';
  throw new BootError(`boot check at ${options.otaUrl} failed${tries}: ${lastError}`);
}

/** Answers the activation challenge with HMAC-SHA256(eFuse key, challenge) and polls while the server says 202. */
export async function activate(
  options: BootOptions,
  activation: NonNullable<OtaResponse['activation']>,
): Promise<boolean> {
  const { identity } = options;
  if (!identity.serialNumber || !identity.hmacKey) {
    options.log('activation requested but this device has no serial/eFuse key', { code: activation.code });
    return false;
  }
  const key = /^[0-9a-f]{64}$/i.test(identity.hmacKey)
    ? Buffer.from(identity.hmacKey, 'hex')
    : Buffer.from(identity.hmacKey);
  const hmac = createHmac('sha256', key).update(activation.challenge).digest('hex');
  const url = new URL(
    'activate',
    options.otaUrl.endsWith('/') ? options.otaUrl : `${options.otaUrl}/`,
  ).toString();
  const { headers } = bootRequest(options);
  for (let attempt = 0; attempt < options.activationAttempts; attempt++) {
    const response = await fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        algorithm: 'hmac-sha256',
        serial_number: identity.serialNumber,
        challenge: activation.challenge,
        hmac,
      }),
      signal: timeoutSignal(options.fetchTimeoutMs, options.signal),
    });
    await response.arrayBuffer();
    if (response.status === 200) return true;
    if (response.status !== 202) {
      options.log('activation refused', { status: response.status });
      return false;
    }
    await options.sleep(options.activationPollMs, options.signal);
  }
  return false;
}

export interface BootHooks {
  /** Each pass through the bootloader (the first boot and every reboot into an update). */
  booting(): void;
  rebooting(): void;
  rolledBack(previous: PartitionLabel): void;
  /** Persist the flash after an update (the firmware writes otadata before rebooting). */
  save(): Promise<void>;
}

/**
 * The firmware's start-up: check the version, install an offered update and reboot into it (at most three times,
 * so a server that always offers something cannot loop the device), then answer activation.
 */
export async function bootSequence(options: BootOptions, hooks: BootHooks): Promise<OtaResponse> {
  for (let round = 0; round < 4; round++) {
    hooks.booting();
    const response = await checkVersion(options);
    if (wantsUpgrade(options.flash, response.firmware) && round < 3) {
      const previous = options.flash.running;
      if ((await installFirmware(options, response.firmware!)) === 'installed') {
        hooks.rebooting();
        if (bootloaderSelect(options.flash, previous).rolledBack) hooks.rolledBack(previous);
        await hooks.save();
        continue;
      }
    }
    if (response.activation) await activate(options, response.activation);
    return response;
  }
  throw new BootError('boot did not settle after 3 firmware updates');
}

export type UpgradeOutcome = 'none' | 'installed' | 'download_failed';

/** Whether the firmware would install this offer: newer by dotted-integer comparison, or force = 1. */
export function wantsUpgrade(flash: FlashState, firmware: OtaResponse['firmware']): boolean {
  if (!firmware?.version || !firmware.url) return false;
  if (firmware.force === 1) return firmware.version !== runningVersion(flash);
  return (compareVersions(firmware.version, runningVersion(flash)) ?? 0) > 0;
}

/** Downloads the image and writes it to the other partition; the caller reboots into it. */
export async function installFirmware(
  options: BootOptions,
  firmware: NonNullable<OtaResponse['firmware']>,
): Promise<UpgradeOutcome> {
  let image: Uint8Array;
  try {
    const response = await fetch(firmware.url, {
      signal: timeoutSignal(options.fetchTimeoutMs * 4, options.signal),
    });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    image = new Uint8Array(await response.arrayBuffer());
    if (image.length === 0) throw new Error('empty image');
  } catch (error) {
    options.log('firmware download failed; keeping the running version', { error: (error as Error).message });
    return 'download_failed';
  }
  const target = otherPartition(options.flash.running);
  options.flash.partitions[target] = {
    version: firmware.version,
    image: image[0] === ESP_IMAGE_MAGIC ? 'valid' : 'invalid',
  };
  options.flash.running = target;
  options.log('firmware installed; rebooting', {
    version: firmware.version,
    partition: target,
    bytes: image.length,
  });
  return 'installed';
}

/** What the bootloader does on the reboot after an update: an image that fails its check rolls back. */
export function bootloaderSelect(flash: FlashState, previous: PartitionLabel): { rolledBack: boolean } {
  if (flash.partitions[flash.running].image === 'valid') return { rolledBack: false };
  flash.running = previous;
  return { rolledBack: true };
}

function timeoutSignal(ms: number, outer?: AbortSignal): AbortSignal {
  const signals = [AbortSignal.timeout(ms)];
  if (outer) signals.push(outer);
  return AbortSignal.any(signals);
}
