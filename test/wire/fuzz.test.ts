// Robustness: thousands of random and mutated frames into one device connection. The server must stay
// up, keep that same connection, and still answer it afterwards.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBinary } from '../../src/protocol/index.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

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

/** A frame as bytes plus whether it goes as a binary message. */
type Message = { data: string | Uint8Array; binary: boolean };

function mutate(text: string, at: number, kind: number): string {
  const i = at % Math.max(1, text.length);
  switch (kind % 4) {
    case 0:
      return text.slice(0, i); // truncated
    case 1:
      return text.slice(0, i) + text.slice(i + 1); // a character lost
    case 2:
      return `${text.slice(0, i)}\u0000${text.slice(i)}`; // a stray byte
    default:
      return text.replace(/"[a-z_]+":/, '"type":'); // a field renamed
  }
}

const message: fc.Arbitrary<Message> = fc.oneof(
  // structurally plausible frames with hostile values
  fc
    .record(
      {
        type: fc.constantFrom('hello', 'listen', 'abort', 'mcp', 'event', 'tts', 'nonsense', ''),
        state: fc.oneof(fc.constantFrom('start', 'stop', 'detect'), fc.anything()),
        mode: fc.oneof(fc.constantFrom('auto', 'manual', 'realtime'), fc.anything()),
        name: fc.anything(),
        data: fc.anything(),
        payload: fc.anything(),
        version: fc.anything(),
        features: fc.anything(),
      },
      { requiredKeys: ['type'] },
    )
    .map((frame) => ({ data: JSON.stringify(frame), binary: false })),
  // valid frames with mutations
  fc
    .tuple(fc.constantFrom(...VALID_FRAMES), fc.nat(), fc.nat())
    .map(([frame, at, kind]) => ({ data: mutate(JSON.stringify(frame), at, kind), binary: false })),
  // any JSON at all, and any text
  fc.json().map((data) => ({ data, binary: false })),
  fc.string({ maxLength: 300 }).map((data) => ({ data, binary: false })),
  // binary: random bytes, and v2 packets with lying headers or JSON payloads
  fc.uint8Array({ maxLength: 400 }).map((data) => ({ data, binary: true })),
  fc
    .tuple(fc.uint8Array({ maxLength: 200 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: -3, max: 3 }))
    .map(([payload, type, lie]) => {
      const packet = encodeBinary(2, payload, { payloadType: type < 2 ? type : 0 });
      const view = new DataView(packet.buffer);
      if (type >= 2) view.setUint16(2, type);
      view.setUint32(12, Math.max(0, payload.length + lie));
      return { data: packet, binary: true };
    }),
);

let t: TestVoice;
beforeAll(async () => {
  t = await startTestVoice();
});
afterAll(async () => {
  await t.close();
});

describe('fuzzed device frames', () => {
  it('10,000 random and mutated frames leave the server and the same connection working', async () => {
    const robot = t.robot({ protocolVersion: 2 });
    await robot.start();
    const session = await eventually(() => t.voice.registry.get(robot.deviceId));
    const messages = fc.sample(message, { numRuns: 10_000, seed: 20261121 });
    // plus frames above the size limit, text and binary
    messages.push(
      { data: 'x'.repeat(70_000), binary: false },
      { data: new Uint8Array(100_000), binary: true },
    );
    let disconnected = false;
    robot.on('disconnected', () => {
      disconnected = true;
    });
    for (const [index, m] of messages.entries()) {
      robot.sendRaw(m.data, m.binary);
      if (index % 500 === 0) await new Promise((resolve) => setImmediate(resolve));
    }

    // Same connection, still answered: a fresh hello gets a server hello with the same session.
    const reply = robot.waitFor((frame) => frame.type === 'hello', 10_000);
    robot.sendJson({ type: 'hello', version: 2, transport: 'websocket', features: { mcp: true } });
    const hello = await reply;
    expect(hello).toMatchObject({ type: 'hello', session_id: session.sessionId });
    expect(disconnected).toBe(false);
    expect(t.voice.registry.get(robot.deviceId)).toBe(session);
    expect(session.isClosed).toBe(false);
    expect(session.stats.rejectedFrames).toBeGreaterThan(1000);

    // ...and MCP still works in both directions on it.
    const status = await session.mcp.callTool('self.get_device_status');
    expect(JSON.stringify(status)).toContain('audio_speaker');

    // The HTTP side is alive too.
    expect((await fetch(`${t.httpUrl}/device/admin/devices`)).status).toBe(200);
  }, 60_000);
});
