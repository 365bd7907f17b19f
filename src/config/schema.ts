// The one typed configuration of deskbot. Every default lives here; config/voice.yaml documents them.
import { z } from 'zod';

const port = z.number().int().min(0).max(65535);
const binaryVersion = z.literal([0, 1, 2, 3]);

export const configSchema = z.object({
  data_dir: z.string().default('./data'),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  server: z
    .object({
      bind_host: z.string().default('0.0.0.0'),
      ws_port: port.default(8000),
      http_port: port.default(8003),
      /** WebSocket URL handed to devices by OTA; empty = derived from the request's Host and ws_port. */
      websocket: z.string().default(''),
      /** Host name put into URLs handed to devices (vision, firmware); empty = the request's Host. */
      public_host: z.string().default(''),
      /** Binary protocol version announced in the OTA response (0 = do not announce; device default 1). */
      ws_protocol_version: binaryVersion.default(0),
      /** Minutes east of UTC in server_time; null = this machine's offset. */
      timezone_offset_min: z.number().int().min(-720).max(840).nullable().default(null),
      /** Close a connection that has not said hello by then. The device itself gives up after 10 s. */
      hello_timeout_sec: z.number().positive().default(30),
      /** Close a connection after this long without any frame (a device may vanish without a Close). */
      idle_timeout_sec: z.number().positive().default(300),
      /** Frames larger than this are logged and dropped; the connection stays up. */
      max_frame_bytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024),
    })
    .prefault({}),
  auth: z
    .object({
      enabled: z.boolean().default(false),
      /** HMAC secret for device tokens; empty = generated once and kept under data_dir. */
      secret: z.string().default(''),
      token_ttl_sec: z
        .number()
        .int()
        .positive()
        .default(30 * 24 * 3600),
    })
    .prefault({}),
  firmware: z
    .object({
      /** Offer the image even when it is not newer (force = 1 in the OTA response). */
      force: z.boolean().default(false),
    })
    .prefault({}),
  activation: z
    .object({
      /** Shared HMAC key for Activation-Version 2 devices; empty = activation off. */
      hmac_key: z.string().default(''),
      timeout_ms: z.number().int().positive().default(30_000),
      message: z.string().default('Activating this robot with deskbot'),
    })
    .prefault({}),
  mcp: z
    .object({
      timeout_ms: z.number().int().positive().default(30_000),
    })
    .prefault({}),
});

export type Config = z.infer<typeof configSchema>;
