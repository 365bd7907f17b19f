// Hostile device frames for the WebSocket fuzz (test/wire/fuzz.test.ts), per binary protocol version: text
// frames (random JSON, mutated valid frames, wrong types for every known `type`, frames around the size limit,
// deep nesting) and binary frames (random bytes, empty, v2/v3 headers lying about version, type and size, JSON
// inside binary, packets at the frame limit and one byte over).
import fc from 'fast-check';
import { type BinaryVersion, encodeBinary, LISTEN_MODES } from '../../src/protocol/index.js';

/** config server.max_frame_bytes (default). */
export const MAX_FRAME = 64 * 1024;

/** One WebSocket message as the device would send it. */
export type Message = { data: string | Uint8Array; binary: boolean };
const text = (data: string): Message => ({ data, binary: false });

// ---- text frames ---------------------------------------------------------------------------------------------

const VALID_FRAMES = [
  {
    type: 'hello',
    version: 1,
    features: { mcp: true },
    transport: 'websocket',
    audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
  },
  { type: 'listen', state: 'start', mode: 'auto' },
  { type: 'listen', state: 'detect', text: 'hi pip' },
  { type: 'listen', state: 'stop' },
  { type: 'abort', reason: 'wake_word_detected' },
  { type: 'event', name: 'sound_event', data: { direction: 'left', balance: -0.4, energy: 0.8 } },
  { type: 'mcp', payload: { jsonrpc: '2.0', id: 99, result: { tools: [] } } },
];

function mutate(source: string, at: number, kind: number): string {
  const i = at % Math.max(1, source.length);
  switch (kind % 5) {
    case 0:
      return source.slice(0, i); // truncated
    case 1:
      return source.slice(0, i) + source.slice(i + 1); // a character lost
    case 2:
      return `${source.slice(0, i)}\u0000${source.slice(i)}`; // a stray byte
    case 3:
      return source.replace(/"[a-z_]+":/, '"type":'); // a field renamed
    default:
      return `${source}${source}`; // two frames in one message
  }
}

/** Values of every JSON type, for fields that expect one in particular. */
const hostile = fc.oneof(
  fc.anything({ maxDepth: 2, maxKeys: 4 }),
  fc.constantFrom(null, true, 0, -1, 1.5, 2 ** 53 + 1, -1e308, '', [], {}, '__proto__', { __proto__: null }),
);

/** Known frame types with right and wrong field types mixed. */
const knownTyped = fc.oneof(
  fc.record(
    {
      type: fc.constant('hello'),
      version: fc.oneof(fc.integer({ min: 0, max: 4 }), hostile),
      features: fc.oneof(fc.record({ mcp: fc.oneof(fc.boolean(), hostile), aec: hostile }), hostile),
      transport: fc.oneof(fc.constant('websocket'), hostile),
      audio_params: fc.oneof(
        fc.record({ format: hostile, sample_rate: hostile, channels: hostile, frame_duration: hostile }),
        hostile,
      ),
    },
    { requiredKeys: ['type'] },
  ),
  fc.record(
    {
      type: fc.constant('listen'),
      state: fc.oneof(fc.constantFrom('start', 'stop', 'detect'), hostile),
      mode: fc.oneof(fc.constantFrom(...LISTEN_MODES), hostile),
      text: fc.oneof(fc.string({ maxLength: 80 }), hostile),
    },
    { requiredKeys: ['type'] },
  ),
  fc.record({ type: fc.constant('abort'), reason: hostile }, { requiredKeys: ['type'] }),
  fc.record(
    {
      type: fc.constant('mcp'),
      session_id: hostile,
      payload: fc.oneof(
        hostile,
        fc.record(
          {
            jsonrpc: fc.oneof(fc.constant('2.0'), hostile),
            // Small numeric ids hit the server's own pending requests (initialize, tools/list).
            id: fc.oneof(fc.nat(8), fc.string({ maxLength: 4 }), hostile),
            method: fc.oneof(
              fc.constantFrom('initialize', 'tools/list', 'tools/call', 'notifications/x'),
              hostile,
            ),
            params: hostile,
            result: fc.oneof(fc.record({ tools: hostile, nextCursor: hostile, content: hostile }), hostile),
            error: fc.oneof(fc.record({ code: hostile, message: hostile }), hostile),
          },
          { requiredKeys: [] },
        ),
      ),
    },
    { requiredKeys: ['type'] },
  ),
  fc.record(
    {
      type: fc.constant('event'),
      name: fc.oneof(fc.constantFrom('face_detected', 'sound_event', 'head_pet', 'face_lost', ''), hostile),
      data: hostile,
    },
    { requiredKeys: ['type'] },
  ),
  fc.record(
    {
      type: fc.oneof(
        fc.constantFrom('tts', 'stt', 'llm', 'system', 'alert', 'goodbye', 'HELLO', ''),
        hostile,
      ),
      state: hostile,
      text: hostile,
      payload: hostile,
    },
    { requiredKeys: ['type'] },
  ),
);

/** Keys that pollute prototypes when a parser or a merge copies them carelessly. */
const poisoned = fc.constantFrom(
  '{"type":"hello","features":{"__proto__":{"mcp":true,"polluted":1}},"audio_params":{"constructor":{"prototype":{"polluted":1}}}}',
  '{"type":"event","name":"sound_event","data":{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}}}}',
  '{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{"__proto__":{"tools":[{"name":"x"}],"polluted":1}}}}',
  '{"type":"listen","state":"detect","text":"hi pip","__proto__":{"polluted":1}}',
  '{"__proto__":{"type":"hello","polluted":1}}',
);

/** A listen-detect frame of exactly `bytes` bytes (for the frame-size limit and its neighbours). */
function sizedFrame(bytes: number): string {
  const shell = JSON.stringify({ type: 'listen', state: 'detect', text: '' });
  return shell.replace('"text":""', `"text":"${'y'.repeat(Math.max(0, bytes - shell.length))}"`);
}

/** Nesting the parser and anything that walks the frame (logs, relays, zod) must survive. */
const deeplyNested = fc.tuple(fc.integer({ min: 50, max: 30_000 }), fc.nat(3)).map(([depth, where]) => {
  const arrays = '['.repeat(depth) + ']'.repeat(depth);
  const nest = Math.min(depth, 12_000);
  const objects = `${'{"a":'.repeat(nest)}1${'}'.repeat(nest)}`;
  switch (where) {
    case 0:
      return arrays;
    case 1:
      return `{"type":"event","name":"sound_event","data":${objects}}`;
    case 2:
      return `{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":${objects}}}`;
    default:
      return `{"type":"hello","features":${objects},"audio_params":${arrays}}`;
  }
});

const textFrame: fc.Arbitrary<string> = fc.oneof(
  { weight: 90, arbitrary: knownTyped.map((frame) => JSON.stringify(frame)) },
  {
    weight: 60,
    arbitrary: fc
      .tuple(fc.constantFrom(...VALID_FRAMES), fc.nat(), fc.nat())
      .map(([frame, at, kind]) => mutate(JSON.stringify(frame), at, kind)),
  },
  { weight: 45, arbitrary: fc.json({ maxDepth: 4 }) },
  { weight: 30, arbitrary: fc.string({ maxLength: 300, unit: 'grapheme' }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(1_000, MAX_FRAME - 1, MAX_FRAME, MAX_FRAME + 1, 3 * MAX_FRAME).map(sizedFrame),
  },
  { weight: 1, arbitrary: deeplyNested },
  { weight: 2, arbitrary: poisoned },
);

// ---- binary frames -------------------------------------------------------------------------------------------

/** A v2 packet whose header may lie about its version, type and payload size. */
const v2Packet = fc
  .record({
    payload: fc.uint8Array({ maxLength: 300 }),
    version: fc.oneof({ weight: 4, arbitrary: fc.constant(2) }, fc.integer({ min: 0, max: 0xffff })),
    type: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(0, 1) }, fc.integer({ min: 0, max: 0xffff })),
    lie: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constant(0), fc.integer({ min: 0, max: 0xffffffff })),
    timestamp: fc.integer({ min: 0, max: 0xffffffff }),
  })
  .map(({ payload, version, type, lie, timestamp }) => {
    const packet = encodeBinary(2, payload, { timestampMs: timestamp });
    const view = new DataView(packet.buffer);
    view.setUint16(0, version);
    view.setUint16(2, type);
    const size = lie > 3 ? lie : payload.length + lie;
    view.setUint32(12, Math.min(0xffffffff, Math.max(0, size)));
    return packet;
  });

/** A v3 packet whose header may lie about its type and payload size. */
const v3Packet = fc
  .record({
    payload: fc.uint8Array({ maxLength: 300 }),
    type: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(0, 1) }, fc.integer({ min: 0, max: 0xff })),
    reserved: fc.integer({ min: 0, max: 0xff }),
    lie: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constant(0), fc.integer({ min: 0, max: 0xffff })),
  })
  .map(({ payload, type, reserved, lie }) => {
    const packet = encodeBinary(3, payload);
    const view = new DataView(packet.buffer);
    view.setUint8(0, type);
    view.setUint8(1, reserved);
    const size = lie > 3 ? lie : payload.length + lie;
    view.setUint16(2, Math.min(0xffff, Math.max(0, size)));
    return packet;
  });

/** A correct packet of `total` bytes in the session's own framing: exactly at the frame limit, or one over. */
function sizedPacket(version: BinaryVersion, total: number): Uint8Array {
  const header = version === 2 ? 16 : version === 3 ? 4 : 0;
  return encodeBinary(version, new Uint8Array(total - header).fill(0xf8));
}

function binaryFrame(version: BinaryVersion): fc.Arbitrary<Uint8Array> {
  const jsonInside =
    version === 1
      ? fc.constant(new Uint8Array(0))
      : textFrame.map((frame) =>
          encodeBinary(version, new TextEncoder().encode(frame).subarray(0, 60_000), { payloadType: 1 }),
        );
  return fc.oneof(
    { weight: 60, arbitrary: fc.uint8Array({ maxLength: 400 }) },
    { weight: 6, arbitrary: fc.constant(new Uint8Array(0)) },
    { weight: 6, arbitrary: fc.uint8Array({ maxLength: 20 }) }, // truncated headers
    { weight: version === 2 ? 75 : 24, arbitrary: v2Packet },
    { weight: version === 3 ? 75 : 24, arbitrary: v3Packet },
    { weight: version === 1 ? 0 : 30, arbitrary: jsonInside },
    { weight: 1, arbitrary: fc.constantFrom(MAX_FRAME, MAX_FRAME + 1).map((n) => sizedPacket(version, n)) },
  );
}

export function messages(version: BinaryVersion): fc.Arbitrary<Message> {
  return fc.oneof(
    { weight: 55, arbitrary: textFrame.map(text) },
    { weight: 45, arbitrary: binaryFrame(version).map((data) => ({ data, binary: true })) },
  );
}
