// Binary audio framing of the device WebSocket (negotiated by the Protocol-Version header).
// v1: the message is a raw Opus packet.
// v2: 16-byte header, big-endian: version u16, type u16, reserved u32, timestamp u32, payload_size u32.
// v3: 4-byte header: type u8, reserved u8, payload_size u16 big-endian.
// The firmware trusts payload_size, so we write it exactly and reject any packet whose size disagrees.

export type BinaryVersion = 1 | 2 | 3;
export const BINARY_VERSIONS: readonly BinaryVersion[] = [1, 2, 3];

export const PAYLOAD_OPUS = 0;
export const PAYLOAD_JSON = 1;

export const V2_HEADER_BYTES = 16;
export const V3_HEADER_BYTES = 4;
const V3_MAX_PAYLOAD = 0xffff;

export interface BinaryPacket {
  /** 0 = Opus, 1 = JSON (v2/v3 only; v1 is always Opus). */
  payloadType: number;
  /** Milliseconds, for echo-cancellation alignment (v2 only; 0 otherwise). */
  timestampMs: number;
  payload: Uint8Array;
}

export class FramingError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'FramingError';
  }
}

export function isBinaryVersion(value: unknown): value is BinaryVersion {
  return value === 1 || value === 2 || value === 3;
}

export function encodeBinary(
  version: BinaryVersion,
  payload: Uint8Array,
  options: { payloadType?: number; timestampMs?: number } = {},
): Uint8Array {
  const payloadType = options.payloadType ?? PAYLOAD_OPUS;
  if (version === 1) {
    if (payloadType !== PAYLOAD_OPUS) throw new FramingError('unsupported_type', 'v1 carries Opus only');
    return payload;
  }
  if (version === 2) {
    const out = new Uint8Array(V2_HEADER_BYTES + payload.length);
    const view = new DataView(out.buffer);
    view.setUint16(0, 2);
    view.setUint16(2, payloadType);
    view.setUint32(4, 0);
    view.setUint32(8, (options.timestampMs ?? 0) >>> 0);
    view.setUint32(12, payload.length);
    out.set(payload, V2_HEADER_BYTES);
    return out;
  }
  if (payload.length > V3_MAX_PAYLOAD) {
    throw new FramingError(
      'payload_too_large',
      `v3 payload of ${payload.length} bytes exceeds ${V3_MAX_PAYLOAD}`,
    );
  }
  const out = new Uint8Array(V3_HEADER_BYTES + payload.length);
  const view = new DataView(out.buffer);
  view.setUint8(0, payloadType);
  view.setUint8(1, 0);
  view.setUint16(2, payload.length);
  out.set(payload, V3_HEADER_BYTES);
  return out;
}

export function decodeBinary(version: BinaryVersion, data: Uint8Array): BinaryPacket {
  if (version === 1) return { payloadType: PAYLOAD_OPUS, timestampMs: 0, payload: data };
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (version === 2) {
    if (data.length < V2_HEADER_BYTES) {
      throw new FramingError(
        'truncated_header',
        `v2 packet of ${data.length} bytes is shorter than its 16-byte header`,
      );
    }
    const headerVersion = view.getUint16(0);
    if (headerVersion !== 2) {
      throw new FramingError('bad_version', `v2 packet header says version ${headerVersion}`);
    }
    const payloadSize = view.getUint32(12);
    checkSize(payloadSize, data.length - V2_HEADER_BYTES, 'v2');
    return {
      payloadType: checkType(view.getUint16(2)),
      timestampMs: view.getUint32(8),
      payload: data.subarray(V2_HEADER_BYTES),
    };
  }
  if (data.length < V3_HEADER_BYTES) {
    throw new FramingError(
      'truncated_header',
      `v3 packet of ${data.length} bytes is shorter than its 4-byte header`,
    );
  }
  const payloadSize = view.getUint16(2);
  checkSize(payloadSize, data.length - V3_HEADER_BYTES, 'v3');
  return {
    payloadType: checkType(view.getUint8(0)),
    timestampMs: 0,
    payload: data.subarray(V3_HEADER_BYTES),
  };
}

function checkSize(declared: number, actual: number, label: string): void {
  if (declared !== actual) {
    throw new FramingError(
      'size_mismatch',
      `${label} header declares ${declared} payload bytes but ${actual} followed`,
    );
  }
}

function checkType(type: number): number {
  if (type !== PAYLOAD_OPUS && type !== PAYLOAD_JSON) {
    throw new FramingError('unknown_type', `unknown binary payload type ${type}`);
  }
  return type;
}
