// Text (JSON) frames of the device WebSocket, both directions.
// Input is validated with zod; an unknown `type` is an ignorable result, never an exception,
// because newer firmware may send frames this server does not know yet.
import { z } from 'zod';

export const LISTEN_MODES = ['auto', 'manual', 'realtime', 'vad'] as const;
export type ListenMode = (typeof LISTEN_MODES)[number];

const audioParams = z.looseObject({
  format: z.string().optional(),
  sample_rate: z.number().int().positive().optional(),
  channels: z.number().int().positive().optional(),
  frame_duration: z.number().int().positive().optional(),
});

const deviceHello = z.looseObject({
  type: z.literal('hello'),
  version: z.number().int().optional(),
  features: z.looseObject({ mcp: z.boolean().optional(), aec: z.boolean().optional() }).optional(),
  transport: z.string().optional(),
  audio_params: audioParams.optional(),
});

const listen = z.looseObject({
  type: z.literal('listen'),
  state: z.enum(['start', 'stop', 'detect']),
  mode: z.enum(LISTEN_MODES).optional(),
  text: z.string().optional(),
});

const abort = z.looseObject({ type: z.literal('abort'), reason: z.string().optional() });

const jsonObject = z.record(z.string(), z.unknown());

const mcp = z.looseObject({ type: z.literal('mcp'), payload: jsonObject, session_id: z.string().optional() });

const event = z.looseObject({
  type: z.literal('event'),
  name: z.string().min(1),
  data: jsonObject.optional(),
});

const deviceFrame = z.discriminatedUnion('type', [deviceHello, listen, abort, mcp, event]);
export type DeviceFrame = z.infer<typeof deviceFrame>;
export type DeviceHello = z.infer<typeof deviceHello>;
export type ListenFrame = z.infer<typeof listen>;
export type EventFrame = z.infer<typeof event>;
export const KNOWN_DEVICE_TYPES = ['hello', 'listen', 'abort', 'mcp', 'event'] as const;

const serverHello = z.looseObject({
  type: z.literal('hello'),
  transport: z.literal('websocket'),
  session_id: z.string(),
  audio_params: audioParams,
});
const stt = z.looseObject({ type: z.literal('stt'), text: z.string(), session_id: z.string().optional() });
const tts = z.looseObject({
  type: z.literal('tts'),
  state: z.enum(['start', 'stop', 'sentence_start']),
  text: z.string().optional(),
  session_id: z.string().optional(),
});
const llm = z.looseObject({
  type: z.literal('llm'),
  emotion: z.string(),
  text: z.string().optional(),
  session_id: z.string().optional(),
});
const system = z.looseObject({
  type: z.literal('system'),
  command: z.string(),
  session_id: z.string().optional(),
});
const alert = z.looseObject({
  type: z.literal('alert'),
  status: z.string(),
  message: z.string(),
  emotion: z.string().optional(),
});

const serverFrame = z.discriminatedUnion('type', [serverHello, stt, tts, llm, mcp, system, alert]);
export type ServerFrame = z.infer<typeof serverFrame>;
export type ServerHello = z.infer<typeof serverHello>;

export type ParseResult<T> =
  | { kind: 'frame'; frame: T }
  | { kind: 'unknown'; type: string }
  | { kind: 'error'; code: string; message: string };

function parseWith<T>(schema: z.ZodType<T>, known: readonly string[], text: string): ParseResult<T> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { kind: 'error', code: 'malformed_json', message: 'frame is not valid JSON' };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { kind: 'error', code: 'not_an_object', message: 'frame must be a JSON object' };
  }
  const type = (raw as { type?: unknown }).type;
  if (typeof type !== 'string') {
    return { kind: 'error', code: 'missing_type', message: 'frame has no string "type" field' };
  }
  if (!known.includes(type)) return { kind: 'unknown', type };
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : type;
    return {
      kind: 'error',
      code: 'invalid_frame',
      message: `${type} frame: ${where}: ${issue?.message ?? 'invalid'}`,
    };
  }
  return { kind: 'frame', frame: parsed.data };
}

const KNOWN_SERVER_TYPES = ['hello', 'stt', 'tts', 'llm', 'mcp', 'system', 'alert'] as const;

export function parseDeviceFrame(text: string): ParseResult<DeviceFrame> {
  return parseWith(deviceFrame, KNOWN_DEVICE_TYPES, text);
}

export function parseServerFrame(text: string): ParseResult<ServerFrame> {
  return parseWith(serverFrame, KNOWN_SERVER_TYPES, text);
}

/** Encodes a frame for the wire; the schemas double as a guard against sending something the device rejects. */
export function encodeFrame(frame: ServerFrame | DeviceFrame): string {
  return JSON.stringify(frame);
}
