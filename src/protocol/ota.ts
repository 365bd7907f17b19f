// Boot (OTA) request and response records (SPEC "Boot (OTA) records", DESIGN §4).
// Strict only where we read: the server uses `application.name`, `application.version` and `board.type`
// (to pick a firmware image), so those are checked with a clear error. Every other field may be missing or
// of any JSON type — real clients differ (the browser test page sends `minimum_free_heap_size: 0` where the
// firmware sends a string, and zeros and empty strings for what it cannot know).
import { z } from 'zod';

export const otaRequestBodySchema = z.looseObject({
  application: z.looseObject({ name: z.string().optional(), version: z.string().optional() }).nullish(),
  board: z.looseObject({ type: z.string().optional() }).nullish(),
});
export type OtaRequestBody = z.infer<typeof otaRequestBodySchema>;

export interface OtaResponse {
  websocket?: { url: string; token?: string; version?: number };
  server_time?: { timestamp: number; timezone_offset: number };
  firmware?: { version: string; url: string; force: 0 | 1 };
  activation?: { message: string; code: string; challenge: string; timeout_ms: number };
  // `mqtt` is deliberately absent: any mqtt key makes the firmware switch to MQTT (DESIGN §4).
}

export const activateBodySchema = z.looseObject({
  algorithm: z.string().optional(),
  serial_number: z.string().optional(),
  challenge: z.string().optional(),
  hmac: z.string().optional(),
});
export type ActivateBody = z.infer<typeof activateBodySchema>;

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
/**
 * Device-Id is a colon-separated MAC; the firmware sends it lowercase, the browser test page upper case
 * (`AA:BB:CC:00:11:22`). Every id is kept lowercase so one robot is one device everywhere.
 */
export function normaliseDeviceId(value: string): string | null {
  const lower = value.trim().toLowerCase();
  return MAC.test(lower) ? lower : null;
}

/** A device id as named by an operator or another service: a MAC in any case becomes the canonical one. */
export function canonicalDeviceId(value: string): string {
  return normaliseDeviceId(value) ?? value.trim();
}

/**
 * Dotted-integer comparison as the firmware does it: missing parts count as 0, so 1.0 == 1.0.0,
 * 1.0.1 > 1.0 and 1.10.0 > 1.9.9. Returns null when either side is not dotted integers.
 */
export function compareVersions(a: string, b: string): number | null {
  const pa = parseVersion(a);
  const pb = parseVersion(b);
  if (!pa || !pb) return null;
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (diff !== 0) return Math.sign(diff);
  }
  return 0;
}

export function parseVersion(version: string): number[] | null {
  const trimmed = version.trim().replace(/^v/i, '');
  if (!/^\d+(\.\d+)*$/.test(trimmed)) return null;
  return trimmed.split('.').map(Number);
}
