// Binary audio framing v1/v2/v3 (SPEC "Binary audio framing", DESIGN §4): byte-exact, big-endian,
// and payload_size must be exact because the firmware trusts it.
import { describe, expect, it } from 'vitest';
import {
  type BinaryVersion,
  decodeBinary,
  encodeBinary,
  FramingError,
  PAYLOAD_JSON,
  PAYLOAD_OPUS,
} from '../../src/protocol/index.js';

const bytes = (...values: number[]) => Uint8Array.from(values);
const hex = (data: Uint8Array) => Buffer.from(data).toString('hex');
/** Hex with optional spaces between header fields, for readability. */
const unspaced = (wire: string) => wire.replace(/ /g, '');
const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

function framingCode(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(FramingError);
    return (error as FramingError).code;
  }
  throw new Error('expected a FramingError, but nothing was thrown');
}

describe('hand-written byte vectors', () => {
  const cases: Array<{
    name: string;
    version: BinaryVersion;
    type: number;
    ts: number;
    payload: number[];
    wire: string;
  }> = [
    {
      name: 'v1 opus is the raw packet',
      version: 1,
      type: PAYLOAD_OPUS,
      ts: 0,
      payload: [0xaa, 0xbb],
      wire: 'aabb',
    },
    { name: 'v1 empty', version: 1, type: PAYLOAD_OPUS, ts: 0, payload: [], wire: '' },
    {
      name: 'v2 opus with timestamp',
      version: 2,
      type: PAYLOAD_OPUS,
      ts: 0x01020304,
      payload: [0xaa, 0xbb],
      wire: '0002 0000 00000000 01020304 00000002 aabb',
    },
    {
      name: 'v2 json type',
      version: 2,
      type: PAYLOAD_JSON,
      ts: 0,
      payload: [0x7b, 0x7d],
      wire: '0002 0001 00000000 00000000 00000002 7b7d',
    },
    {
      name: 'v2 empty payload, max timestamp',
      version: 2,
      type: PAYLOAD_OPUS,
      ts: 0xffffffff,
      payload: [],
      wire: '0002 0000 00000000 ffffffff 00000000',
    },
    {
      name: 'v2 payload_size is big-endian',
      version: 2,
      type: PAYLOAD_OPUS,
      ts: 0,
      payload: new Array(0x0102).fill(0x11),
      wire: `0002 0000 00000000 00000000 00000102 ${'11'.repeat(0x0102)}`,
    },
    {
      name: 'v3 opus',
      version: 3,
      type: PAYLOAD_OPUS,
      ts: 0,
      payload: [0xaa, 0xbb],
      wire: '00 00 0002 aabb',
    },
    {
      name: 'v3 json',
      version: 3,
      type: PAYLOAD_JSON,
      ts: 0,
      payload: [0x7b, 0x7d],
      wire: '01 00 0002 7b7d',
    },
    { name: 'v3 empty', version: 3, type: PAYLOAD_OPUS, ts: 0, payload: [], wire: '00 00 0000' },
    {
      name: 'v3 payload_size is big-endian',
      version: 3,
      type: PAYLOAD_OPUS,
      ts: 0,
      payload: new Array(0x0102).fill(0x22),
      wire: `0000 0102 ${'22'.repeat(0x0102)}`,
    },
  ];

  it.each(cases)('encodes $name', ({ version, type, ts, payload, wire }) => {
    const encoded = encodeBinary(version, Uint8Array.from(payload), { payloadType: type, timestampMs: ts });
    expect(hex(encoded)).toBe(unspaced(wire));
  });

  it.each(cases)('decodes $name', ({ version, type, ts, payload, wire }) => {
    const packet = decodeBinary(version, Uint8Array.from(Buffer.from(unspaced(wire), 'hex')));
    expect(packet.payloadType).toBe(type);
    expect(packet.timestampMs).toBe(version === 2 ? ts : 0);
    expect(Array.from(packet.payload)).toEqual(payload);
  });

  it('the v2 vector from DESIGN §4, spelled out byte by byte', () => {
    const wire = encodeBinary(2, bytes(0xaa, 0xbb), { timestampMs: 0x01020304 });
    expect(Array.from(wire)).toEqual([0, 2, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 2, 0xaa, 0xbb]);
    expect(Array.from(encodeBinary(3, bytes(0xaa, 0xbb)))).toEqual([0, 0, 0, 2, 0xaa, 0xbb]);
  });
});

describe('round trips', () => {
  const payloads: Array<[string, Uint8Array]> = [
    ['empty', new Uint8Array(0)],
    ['one byte', bytes(0xf8)],
    ['opus-sized', Uint8Array.from({ length: 180 }, (_, i) => (i * 37) & 0xff)],
    ['json', json({ type: 'tts', state: 'start' })],
  ];
  const combos = ([2, 3] as BinaryVersion[]).flatMap((version) =>
    [PAYLOAD_OPUS, PAYLOAD_JSON].flatMap((payloadType) =>
      payloads.map(([name, payload]) => ({ version, payloadType, name, payload })),
    ),
  );

  it.each(combos)('v$version type $payloadType: $name', ({ version, payloadType, payload }) => {
    const wire = encodeBinary(version, payload, { payloadType, timestampMs: 1234 });
    const packet = decodeBinary(version, wire);
    expect(packet.payloadType).toBe(payloadType);
    expect(packet.timestampMs).toBe(version === 2 ? 1234 : 0);
    expect(hex(packet.payload)).toBe(hex(payload));
  });

  it.each(payloads)('v1 opus: %s', (_name, payload) => {
    const packet = decodeBinary(1, encodeBinary(1, payload));
    expect(packet).toMatchObject({ payloadType: PAYLOAD_OPUS, timestampMs: 0 });
    expect(hex(packet.payload)).toBe(hex(payload));
  });

  it('v3 carries the largest payload, 65535 bytes, with size ff ff', () => {
    const payload = Uint8Array.from({ length: 65535 }, (_, i) => i & 0xff);
    const wire = encodeBinary(3, payload, { payloadType: PAYLOAD_JSON });
    expect(wire.length).toBe(65539);
    expect(Array.from(wire.subarray(0, 4))).toEqual([1, 0, 0xff, 0xff]);
    expect(Buffer.compare(decodeBinary(3, wire).payload, payload)).toBe(0);
  });

  it('decodes a packet that sits at an offset inside a larger buffer (pooled ws Buffers)', () => {
    const wire = encodeBinary(2, bytes(9, 8, 7), { payloadType: PAYLOAD_JSON, timestampMs: 77 });
    const pool = new Uint8Array(wire.length + 10).fill(0xee);
    pool.set(wire, 5);
    const packet = decodeBinary(2, pool.subarray(5, 5 + wire.length));
    expect(packet).toMatchObject({ payloadType: PAYLOAD_JSON, timestampMs: 77 });
    expect(Array.from(packet.payload)).toEqual([9, 8, 7]);
  });
});

describe('rejections', () => {
  const v2 = (mutate: (view: DataView) => void, payload = bytes(1, 2)) => {
    const wire = encodeBinary(2, payload);
    mutate(new DataView(wire.buffer, wire.byteOffset, wire.byteLength));
    return wire;
  };
  const v3 = (mutate: (view: DataView) => void, payload = bytes(1, 2)) => {
    const wire = encodeBinary(3, payload);
    mutate(new DataView(wire.buffer, wire.byteOffset, wire.byteLength));
    return wire;
  };

  const cases: Array<{ name: string; version: BinaryVersion; data: Uint8Array; code: string }> = [
    { name: 'v2 empty message', version: 2, data: new Uint8Array(0), code: 'truncated_header' },
    { name: 'v2 15-byte header', version: 2, data: new Uint8Array(15).fill(0), code: 'truncated_header' },
    { name: 'v3 empty message', version: 3, data: new Uint8Array(0), code: 'truncated_header' },
    { name: 'v3 3-byte header', version: 3, data: bytes(0, 0, 0), code: 'truncated_header' },
    {
      name: 'v2 size larger than payload',
      version: 2,
      data: v2((v) => v.setUint32(12, 3)),
      code: 'size_mismatch',
    },
    {
      name: 'v2 size smaller than payload',
      version: 2,
      data: v2((v) => v.setUint32(12, 1)),
      code: 'size_mismatch',
    },
    {
      name: 'v2 size 0 with payload',
      version: 2,
      data: v2((v) => v.setUint32(12, 0)),
      code: 'size_mismatch',
    },
    {
      name: 'v3 size larger than payload',
      version: 3,
      data: v3((v) => v.setUint16(2, 3)),
      code: 'size_mismatch',
    },
    {
      name: 'v3 size smaller than payload',
      version: 3,
      data: v3((v) => v.setUint16(2, 1)),
      code: 'size_mismatch',
    },
    {
      name: 'v3 header alone but size 1',
      version: 3,
      data: bytes(0, 0, 0, 1),
      code: 'size_mismatch',
    },
    { name: 'v2 header version 1', version: 2, data: v2((v) => v.setUint16(0, 1)), code: 'bad_version' },
    { name: 'v2 header version 3', version: 2, data: v2((v) => v.setUint16(0, 3)), code: 'bad_version' },
    {
      name: 'v2 header version 0x0200',
      version: 2,
      data: v2((v) => v.setUint16(0, 0x0200)),
      code: 'bad_version',
    },
    { name: 'v2 unknown type 2', version: 2, data: v2((v) => v.setUint16(2, 2)), code: 'unknown_type' },
    {
      name: 'v2 type 0x0100 (little-endian 1)',
      version: 2,
      data: v2((v) => v.setUint16(2, 0x100)),
      code: 'unknown_type',
    },
    { name: 'v3 unknown type 7', version: 3, data: v3((v) => v.setUint8(0, 7)), code: 'unknown_type' },
    { name: 'v3 unknown type 255', version: 3, data: v3((v) => v.setUint8(0, 255)), code: 'unknown_type' },
  ];

  it.each(cases)('decode refuses $name with $code', ({ version, data, code }) => {
    expect(framingCode(() => decodeBinary(version, data))).toBe(code);
  });

  it('v3 encode refuses a 65536-byte payload', () => {
    expect(framingCode(() => encodeBinary(3, new Uint8Array(65536)))).toBe('payload_too_large');
  });

  it('v1 encode refuses a JSON payload (v1 carries Opus only)', () => {
    expect(framingCode(() => encodeBinary(1, json({}), { payloadType: PAYLOAD_JSON }))).toBe(
      'unsupported_type',
    );
  });

  it('FramingError is an Error with name FramingError', () => {
    const error = new FramingError('x', 'y');
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('FramingError');
    expect(error.message).toBe('y');
  });
});
