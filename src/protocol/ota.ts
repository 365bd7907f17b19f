// Boot (OTA) request and response records (SPEC "Boot (OTA) records", DESIGN §4).
// The body schema checks the types of the fields it knows and lets everything else through:
// real firmware bodies vary by board and version, and a missing optional field is not an error.
import { z } from 'zod';

const int = z.number().int();

export const otaRequestBodySchema = z.looseObject({
  version: int.optional(),
  language: z.string().optional(),
  flash_size: int.nonnegative().optional(),
  minimum_free_heap_size: z.string().optional(),
  mac_address: z.string().optional(),
  uuid: z.string().optional(),
  chip_model_name: z.string().optional(),
  chip_info: z
    .looseObject({
      model: int.optional(),
      cores: int.optional(),
      revision: int.optional(),
      features: int.optional(),
    })
    .optional(),
  application: z
    .looseObject({
      name: z.string().optional(),
      version: z.string().optional(),
      compile_time: z.string().optional(),
      idf_version: z.string().optional(),
      elf_sha256: z.string().optional(),
    })
    .optional(),
  partition_table: z
    .array(
      z.looseObject({
        label: z.string(),
        type: int,
        subtype: int,
        address: int,
        size: int,
      }),
    )
    .optional(),
  ota: z.looseObject({ label: z.string().optional() }).optional(),
  display: z
    .looseObject({ monochrome: z.boolean().optional(), width: int.optional(), height: int.optional() })
    .optional(),
  board: z.record(z.string(), z.unknown()).optional(),
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
/** Device-Id is a colon-separated MAC; the firmware sends it lowercase, we accept any case. */
export function normaliseDeviceId(value: string): string | null {
  const lower = value.trim().toLowerCase();
  return MAC.test(lower) ? lower : null;
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
