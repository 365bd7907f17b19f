// Both /metrics endpoints scraped and parsed while the real stack works: a spoken turn through the voice
// server, the bridge's routes, the agent runtime over ACP, the toggles, perception events and a failing
// calendar feed. Each of the bridge's nine metrics must be present from the start and move when its event
// happens; label sets stay bounded (no device id ever becomes a label).
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bridge } from '../../src/bridge/server.js';
import type { VirtualRobot } from '../../src/device/robot.js';
import { startTestBridge } from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { post } from '../support/http.js';
import { freePort } from '../support/net.js';
import { parsePrometheus, type Scrape, scrape } from '../support/prom.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

const NINE = [
  'deskbot_first_audio_latency_seconds',
  'deskbot_http_request_duration_seconds',
  'deskbot_http_request_errors_total',
  'deskbot_acp_sessions',
  'deskbot_smart_mode_changes_total',
  'deskbot_kid_mode_changes_total',
  'deskbot_perception_events_total',
  'deskbot_perception_events_dropped_total',
  'deskbot_calendar_fetch_failures_total',
];

let model: FakeOpenAi;
let t: TestVoice;
let bridge: Bridge;
let bridgeUrl: string;
let robot: VirtualRobot;
let before: Scrape;

const bridgeMetrics = () => scrape(`${bridgeUrl}/metrics`);
const voiceMetrics = () => scrape(`${t.httpUrl}/metrics`);

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: '😊 It is sunny.' });
  const port = await freePort();
  bridgeUrl = `http://127.0.0.1:${port}`;
  t = await startTestVoice({
    voice_provider: 'twotier',
    bridge: { url: bridgeUrl },
    LLM: { TwoTier: { url: model.url, model: 'small', cloud_api_key: 'cloud-key' } },
  });
  ({ bridge } = await startTestBridge(
    {
      voice_provider: 'twotier',
      bridge: { port, voice_url: t.httpUrl },
      LLM: { TwoTier: { cloud_api_key: 'cloud-key' } },
      calendar: { feeds: [{ person: 'alice', source: join(t.dataDir, 'no-such-calendar.ics') }] },
    },
    { dataDir: t.dataDir, agentEnv: { AGENT_MODEL_URL: model.url } },
  ));
  await eventually(async () => (await fetch(`${bridgeUrl}/health`)).ok, 20_000);
  before = await bridgeMetrics();
  robot = t.robot();
  await robot.start();
  await eventually(() => t.voice.conversationOf(t.voice.registry.get(robot.deviceId)!));
}, 60_000);

afterAll(async () => {
  await bridge?.close();
  await t?.close();
  await model?.close();
});

describe('GET /metrics on the bridge', () => {
  it('exposes exactly the nine metrics, each with its type, before anything happened', () => {
    const ours = [...before.types.keys()].filter((name) => name.startsWith('deskbot_'));
    expect(ours.sort()).toEqual([...NINE].sort());
    expect(before.types.get('deskbot_first_audio_latency_seconds')).toBe('histogram');
    expect(before.types.get('deskbot_http_request_duration_seconds')).toBe('histogram');
    expect(before.types.get('deskbot_acp_sessions')).toBe('gauge');
    for (const name of NINE.filter((n) => n.endsWith('_total')))
      expect(before.types.get(name)).toBe('counter');
    expect(before.value('deskbot_first_audio_latency_seconds_count')).toBe(0);
  });

  it('a spoken turn moves the voice stage timings and the bridge first-audio histogram', async () => {
    const done = robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 30_000);
    await robot.say('what is the weather like today');
    await done;
    const voice = await eventually(async () => {
      const m = await voiceMetrics();
      return m.value('deskbot_voice_turn_stage_seconds_count', { stage: 'first_audio' }) >= 1 && m;
    }, 10_000);
    for (const stage of ['stt', 'first_token', 'first_audio'])
      expect(voice.value('deskbot_voice_turn_stage_seconds_count', { stage })).toBeGreaterThanOrEqual(1);
    // Stages happen in order: stt before the first token before the first audio frame.
    const sum = (stage: string) => voice.value('deskbot_voice_turn_stage_seconds_sum', { stage });
    expect(sum('stt')).toBeLessThanOrEqual(sum('first_token'));
    expect(sum('first_token')).toBeLessThanOrEqual(sum('first_audio'));
    expect(voice.value('deskbot_voice_active_sessions')).toBe(1);
    expect(
      voice.value('deskbot_voice_turns_total', { kind: 'chat', outcome: 'completed' }),
    ).toBeGreaterThanOrEqual(1);

    const after = await eventually(async () => {
      const m = await bridgeMetrics();
      return m.value('deskbot_first_audio_latency_seconds_count') >= 1 && m;
    }, 5000);
    expect(after.value('deskbot_first_audio_latency_seconds_sum')).toBeGreaterThan(0);
    expect(after.value('deskbot_first_audio_latency_seconds_bucket', { le: '+Inf' })).toBe(
      after.value('deskbot_first_audio_latency_seconds_count'),
    );
    // The device's state_changed / chat_status events were relayed and counted by name.
    expect(after.value('deskbot_perception_events_total', { event: 'chat_status' })).toBeGreaterThan(0);
  }, 40_000);

  it('request durations and errors are counted per route pattern, never per raw path', async () => {
    await fetch(`${bridgeUrl}/health`);
    await fetch(`${bridgeUrl}/no/such/route/${robot.deviceId}`);
    const bad = await post(bridgeUrl, '/api/voice/remember', { fact: 42 });
    expect(bad.status).toBe(400);
    const m = await bridgeMetrics();
    expect(
      m.value('deskbot_http_request_duration_seconds_count', { method: 'GET', route: '/health' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      m.value('deskbot_http_request_errors_total', { route: '/api/voice/remember', status: '400' }),
    ).toBe(1);
    expect(
      m.value('deskbot_http_request_errors_total', { route: 'unmatched', status: '404' }),
    ).toBeGreaterThanOrEqual(1);
    // Bounded labels: no sample anywhere carries the device id.
    const text = await (await fetch(`${bridgeUrl}/metrics`)).text();
    expect(text).not.toContain(robot.deviceId);
  });

  it('the ACP session gauge counts the agent sessions the bridge holds', async () => {
    const reply = await post(bridgeUrl, '/api/message', { content: 'hello', channel: 'metrics-test' });
    expect(reply.status).toBe(200);
    const m = await bridgeMetrics();
    expect(m.value('deskbot_acp_sessions')).toBeGreaterThanOrEqual(1);
    expect(m.value('deskbot_acp_sessions')).toBe(bridge.agent().activeSessions);
  }, 30_000);

  it('smart-mode and kid-mode flips count by their new value; a refused flip does not', async () => {
    expect((await post(bridgeUrl, '/admin/kid-mode', { enabled: true })).status).toBe(200);
    expect((await post(bridgeUrl, '/admin/kid-mode', { enabled: true })).status).toBe(200); // no change
    expect((await post(bridgeUrl, '/admin/smart-mode', { enabled: true })).status).toBe(200);
    expect((await post(bridgeUrl, '/admin/smart-mode', { enabled: false })).status).toBe(200);
    const m = await bridgeMetrics();
    expect(m.value('deskbot_kid_mode_changes_total', { enabled: 'true' })).toBe(1);
    expect(m.value('deskbot_smart_mode_changes_total', { enabled: 'true' })).toBe(1);
    expect(m.value('deskbot_smart_mode_changes_total', { enabled: 'false' })).toBe(1);
    await post(bridgeUrl, '/admin/kid-mode', { enabled: false });
  });

  it('perception events count by name (unknown names as other) and drops are counted', async () => {
    const start = await bridgeMetrics();
    const event = (name: string) =>
      post(bridgeUrl, '/api/perception/event', { name, data: {}, device_id: 'metrics-dev', session_id: 's' });
    // A subscriber that never finishes, with room for one event: the next ones push the oldest out.
    const stuck = bridge.perception.bus.subscribe(() => new Promise<void>(() => {}), {
      maxQueue: 1,
      name: 'stuck',
    });
    try {
      expect((await event('face_detected')).status).toBe(200);
      expect((await event('some_new_sensor')).status).toBe(200);
      expect((await event('face_lost')).status).toBe(200);
      expect((await event('face_lost')).status).toBe(200);
      const m = await eventually(async () => {
        const now = await bridgeMetrics();
        return (
          now.value('deskbot_perception_events_total', { event: 'face_lost' }) -
            start.value('deskbot_perception_events_total', { event: 'face_lost' }) ===
            2 && now
        );
      });
      const delta = (name: string, labels?: Record<string, string>) =>
        m.value(name, labels) - start.value(name, labels);
      expect(delta('deskbot_perception_events_total', { event: 'face_detected' })).toBe(1);
      expect(delta('deskbot_perception_events_total', { event: 'other' })).toBe(1);
      expect(delta('deskbot_perception_events_dropped_total')).toBeGreaterThanOrEqual(2);
    } finally {
      stuck();
    }
  });

  it('a failing calendar feed counts a fetch failure for its person', async () => {
    const res = await fetch(`${bridgeUrl}/api/calendar/today`);
    expect(res.status).toBe(200);
    const m = await bridgeMetrics();
    expect(m.value('deskbot_calendar_fetch_failures_total', { person: 'alice' })).toBeGreaterThanOrEqual(1);
  });
});

describe('the Prometheus text parser used above', () => {
  it('reads labels with escapes, +Inf buckets and rejects garbage', () => {
    const m = parsePrometheus(
      '# TYPE x_total counter\nx_total{a="1",b="q\\"uote"} 3\nh_bucket{le="+Inf"} 2\n',
    );
    expect(m.types.get('x_total')).toBe('counter');
    expect(m.value('x_total', { b: 'q"uote' })).toBe(3);
    expect(m.value('h_bucket', { le: '+Inf' })).toBe(2);
    expect(() => parsePrometheus('this is not a metric line at all {')).toThrow();
  });
});
