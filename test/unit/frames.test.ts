// Text frames of the device WebSocket, both directions: round trips, tolerance of unknown types and
// extra fields (newer firmware), and errors that are results, never exceptions.
import { describe, expect, it } from 'vitest';
import {
  type DeviceFrame,
  encodeFrame,
  LISTEN_MODES,
  parseDeviceFrame,
  parseServerFrame,
  type ServerFrame,
} from '../../src/protocol/index.js';

const deviceFrames: Array<[string, DeviceFrame]> = [
  [
    'hello',
    {
      type: 'hello',
      version: 1,
      features: { mcp: true, aec: false },
      transport: 'websocket',
      audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
    },
  ],
  ['hello (bare)', { type: 'hello' }],
  ...LISTEN_MODES.map((mode): [string, DeviceFrame] => [
    `listen start ${mode}`,
    { type: 'listen', state: 'start', mode },
  ]),
  ['listen stop', { type: 'listen', state: 'stop' }],
  ['listen detect', { type: 'listen', state: 'detect', text: 'hey pip' }],
  ['abort', { type: 'abort' }],
  ['abort with reason', { type: 'abort', reason: 'wake_word_detected' }],
  ['mcp', { type: 'mcp', payload: { jsonrpc: '2.0', id: 1, result: { tools: [] } }, session_id: 's1' }],
  [
    'event with data',
    { type: 'event', name: 'sound_event', data: { direction: 'left', balance: -0.4, energy: 3 } },
  ],
  ['event without data', { type: 'event', name: 'face_lost' }],
];

const serverFrames: Array<[string, ServerFrame]> = [
  [
    'hello',
    {
      type: 'hello',
      transport: 'websocket',
      session_id: 'abc',
      audio_params: { format: 'opus', sample_rate: 24000, channels: 1, frame_duration: 60 },
    },
  ],
  ['stt', { type: 'stt', text: 'what time is it', session_id: 'abc' }],
  ['tts start', { type: 'tts', state: 'start', session_id: 'abc' }],
  ['tts sentence_start', { type: 'tts', state: 'sentence_start', text: 'It is noon.', session_id: 'abc' }],
  ['tts stop', { type: 'tts', state: 'stop', session_id: 'abc' }],
  ['llm', { type: 'llm', emotion: 'happy', text: '😊', session_id: 'abc' }],
  ['mcp', { type: 'mcp', payload: { jsonrpc: '2.0', id: 7, method: 'tools/list', params: { cursor: '' } } }],
  ['system', { type: 'system', command: 'reboot', session_id: 'abc' }],
  ['alert', { type: 'alert', status: 'Warning', message: 'low battery', emotion: 'sad' }],
];

describe('round trips through encodeFrame', () => {
  it.each(deviceFrames)('device → server: %s', (_name, frame) => {
    expect(parseDeviceFrame(encodeFrame(frame))).toEqual({ kind: 'frame', frame });
  });

  it.each(serverFrames)('server → device: %s', (_name, frame) => {
    expect(parseServerFrame(encodeFrame(frame))).toEqual({ kind: 'frame', frame });
  });

  it('covers every listen mode the firmware has', () => {
    expect([...LISTEN_MODES].sort()).toEqual(['auto', 'manual', 'realtime', 'vad']);
  });
});

describe('real firmware input', () => {
  it('accepts a firmware hello with extra fields and keeps them', () => {
    const text =
      '{"type":"hello","version":1,"features":{"mcp":true,"aec":true,"future":1},"transport":"websocket",' +
      '"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60,"bits":16},' +
      '"device_name":"pip","language":"en-US"}';
    const result = parseDeviceFrame(text);
    expect(result.kind).toBe('frame');
    if (result.kind !== 'frame') return;
    expect(result.frame).toMatchObject({ type: 'hello', version: 1, device_name: 'pip', language: 'en-US' });
    expect(result.frame).toMatchObject({ features: { mcp: true, future: 1 }, audio_params: { bits: 16 } });
  });

  it('accepts whitespace and key order the firmware produces', () => {
    const text = '{ "session_id" : "", "type" : "listen", "state" : "detect", "text" : "你好小智" }';
    expect(parseDeviceFrame(text)).toEqual({
      kind: 'frame',
      frame: { type: 'listen', state: 'detect', text: '你好小智', session_id: '' },
    });
  });
});

describe('unknown types are ignorable results', () => {
  it.each([
    ['goodbye', '{"type":"goodbye"}'],
    ['empty string', '{"type":""}'],
    ['case differs', '{"type":"HELLO"}'],
    ['prototype name', '{"type":"constructor"}'],
    ['__proto__', '{"type":"__proto__"}'],
    ['with junk fields', '{"type":"iot","descriptors":[1,2,3]}'],
  ])('device parser: %s', (_name, text) => {
    const expected = { kind: 'unknown', type: JSON.parse(text).type };
    expect(parseDeviceFrame(text)).toEqual(expected);
    expect(parseServerFrame(text)).toEqual(expected);
  });

  it('each direction treats the other direction-only types as unknown', () => {
    expect(parseServerFrame('{"type":"listen","state":"start"}')).toEqual({
      kind: 'unknown',
      type: 'listen',
    });
    expect(parseServerFrame('{"type":"abort"}')).toEqual({ kind: 'unknown', type: 'abort' });
    expect(parseDeviceFrame('{"type":"tts","state":"start"}')).toEqual({ kind: 'unknown', type: 'tts' });
    expect(parseDeviceFrame('{"type":"stt","text":"x"}')).toEqual({ kind: 'unknown', type: 'stt' });
  });
});

describe('errors are results with a code', () => {
  const deviceErrors: Array<[string, string, string]> = [
    ['empty text', '', 'malformed_json'],
    ['truncated', '{"type":"hello"', 'malformed_json'],
    ['trailing comma', '{"type":"abort",}', 'malformed_json'],
    ['not JSON', 'hello', 'malformed_json'],
    ['BOM prefix', '\uFEFF{"type":"abort"}', 'malformed_json'],
    ['array', '[{"type":"hello"}]', 'not_an_object'],
    ['empty array', '[]', 'not_an_object'],
    ['number', '42', 'not_an_object'],
    ['null', 'null', 'not_an_object'],
    ['string', '"hello"', 'not_an_object'],
    ['boolean', 'true', 'not_an_object'],
    ['no type', '{"state":"start"}', 'missing_type'],
    ['numeric type', '{"type":1}', 'missing_type'],
    ['null type', '{"type":null}', 'missing_type'],
    ['array type', '{"type":["hello"]}', 'missing_type'],
    ['listen state go', '{"type":"listen","state":"go"}', 'invalid_frame'],
    ['listen without state', '{"type":"listen","mode":"auto"}', 'invalid_frame'],
    ['listen bad mode', '{"type":"listen","state":"start","mode":"push"}', 'invalid_frame'],
    ['listen text number', '{"type":"listen","state":"detect","text":5}', 'invalid_frame'],
    ['hello version x', '{"type":"hello","version":"x"}', 'invalid_frame'],
    ['hello version 1.5', '{"type":"hello","version":1.5}', 'invalid_frame'],
    ['hello features.mcp string', '{"type":"hello","features":{"mcp":"yes"}}', 'invalid_frame'],
    ['hello sample_rate negative', '{"type":"hello","audio_params":{"sample_rate":-1}}', 'invalid_frame'],
    ['event without name', '{"type":"event","data":{}}', 'invalid_frame'],
    ['event empty name', '{"type":"event","name":""}', 'invalid_frame'],
    ['event data array', '{"type":"event","name":"x","data":[1]}', 'invalid_frame'],
    ['mcp without payload', '{"type":"mcp"}', 'invalid_frame'],
    ['mcp payload string', '{"type":"mcp","payload":"{}"}', 'invalid_frame'],
    ['mcp payload array', '{"type":"mcp","payload":[1]}', 'invalid_frame'],
    ['abort reason number', '{"type":"abort","reason":3}', 'invalid_frame'],
  ];

  it.each(deviceErrors)('device: %s → %s', (_name, text, code) => {
    const result = parseDeviceFrame(text);
    expect(result).toMatchObject({ kind: 'error', code });
    if (result.kind === 'error') expect(result.message.length).toBeGreaterThan(0);
  });

  const serverErrors: Array<[string, string]> = [
    ['hello without transport', '{"type":"hello","session_id":"s","audio_params":{}}'],
    ['hello transport mqtt', '{"type":"hello","transport":"mqtt","session_id":"s","audio_params":{}}'],
    ['hello numeric session_id', '{"type":"hello","transport":"websocket","session_id":1,"audio_params":{}}'],
    ['hello without audio_params', '{"type":"hello","transport":"websocket","session_id":"s"}'],
    ['tts state pause', '{"type":"tts","state":"pause"}'],
    ['stt without text', '{"type":"stt"}'],
    ['llm without emotion', '{"type":"llm","text":"x"}'],
    ['system without command', '{"type":"system"}'],
    ['alert without message', '{"type":"alert","status":"x"}'],
  ];

  it.each(serverErrors)('server: %s → invalid_frame', (_name, text) => {
    expect(parseServerFrame(text)).toMatchObject({ kind: 'error', code: 'invalid_frame' });
  });

  it('names the failing field in the message', () => {
    const result = parseDeviceFrame('{"type":"listen","state":"go"}');
    expect(result.kind === 'error' && result.message).toMatch(/listen.*state/);
  });
});

describe('weird inputs never throw', () => {
  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
  const weird = [
    '\u0000',
    '\uD800',
    ' ',
    'NaN',
    '{"type":"hello","version":1e999}',
    '{"type":"hello","__proto__":{"version":"x"}}',
    '{"type":"mcp","payload":{"__proto__":null}}',
    `{"type":"event","name":"x","data":{"a":${deep(5000)}}}`,
    deep(100_000),
    '{'.repeat(100_000),
    `{"type":"${'x'.repeat(1_000_000)}"}`,
    '{"type":"listen","state":"start","mode":"auto","state":"go"}',
    '{"type":"abort","type":"listen"}',
  ];

  it.each(weird.map((text, i): [number, string] => [i, text]))('input #%i', (_i, text) => {
    for (const parse of [parseDeviceFrame, parseServerFrame]) {
      let result: ReturnType<typeof parse> | undefined;
      expect(() => {
        result = parse(text);
      }).not.toThrow();
      expect(['frame', 'unknown', 'error']).toContain(result?.kind);
    }
  });

  it('duplicate keys follow JSON.parse (last wins) and are then validated', () => {
    expect(parseDeviceFrame('{"type":"listen","state":"start","state":"go"}')).toMatchObject({
      kind: 'error',
      code: 'invalid_frame',
    });
  });
});
