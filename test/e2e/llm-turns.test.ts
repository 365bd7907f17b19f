// Language-model turns through the real voice server: a TwoTier tool call escalated to the bridge with the
// filler spoken before the answer, model failures turned into a short spoken apology, and the smart-mode /
// hot-swap routes switching the model for the next turn without a restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VirtualRobot } from '../../src/device/robot.js';
import { FakeBridge } from '../support/fake-bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { connectRobot, eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let local: FakeOpenAi;
let cloud: FakeOpenAi;
let bridge: FakeBridge;
let t: TestVoice;

beforeAll(async () => {
  local = await new FakeOpenAi().start();
  cloud = await new FakeOpenAi().start();
  bridge = await new FakeBridge().start();
  t = await startTestVoice({
    voice_provider: 'twotier',
    bridge: { url: bridge.url, timeout_short: 3 },
    LLM: {
      TwoTier: {
        url: local.url,
        api_key: 'local-key',
        model: 'small-4b',
        cloud_url: cloud.url,
        cloud_api_key: '',
        smart_model: 'big-cloud',
        timeout: 2,
      },
    },
  });
}, 60_000);

afterAll(async () => {
  await t.close();
  await Promise.all([local.close(), cloud.close(), bridge.close()]);
});

const connected = () => connectRobot(t);

const isStop = (f: { type: string; state?: string }) => f.type === 'tts' && f.state === 'stop';

async function ask(robot: VirtualRobot, text: string): Promise<void> {
  const done = robot.waitFor(isStop, 20_000);
  robot.listen('detect', 'auto', text);
  await done;
}

async function post(path: string, body: unknown) {
  const response = await fetch(`${t.httpUrl}/device/admin/${path}`, {
    method: 'POST',
    // The bridge's token: set-toggle is accepted only from the bridge.
    headers: { 'content-type': 'application/json', authorization: `Bearer ${t.voice.admin.token}` },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as any };
}

describe('TwoTier with a bridge', () => {
  it('escalates take_photo: the 😮 filler is spoken while the bridge works, then the answer', async () => {
    const { robot, timeline } = await connected();
    bridge.escalations.take_photo = { result: 'A red mug on a wooden desk.', delayMs: 1200 };
    local.script(
      { toolCalls: [{ name: 'take_photo', arguments: {} }] },
      { text: '😊 I see a red mug on your desk.' },
    );
    await ask(robot, 'what do you see on my desk');

    expect(timeline.labels()).toEqual([
      'stt',
      'llm:thinking',
      'llm:surprised',
      'tts:start',
      'sentence:Let me take a look.',
      'audio',
      'llm:happy',
      'sentence:I see a red mug on your desk.',
      'audio',
      'tts:stop',
    ]);
    const filler = timeline.entries.find(
      (e) => e.kind === 'frame' && e.frame.type === 'tts' && e.frame.text === 'Let me take a look.',
    )!;
    const escalation = bridge.requests.find((r) => r.path === '/api/voice/escalate')!;
    expect(escalation.body).toEqual({ tool: 'take_photo', args: {}, session_id: robot.sessionId });
    expect(filler.at).toBeLessThan(escalation.at + 1200); // spoken before the bridge answered
    const second = local.chatRequests().at(-1)!.body;
    expect(second.messages.at(-1)).toMatchObject({ role: 'tool', content: 'A red mug on a wooden desk.' });
    await eventually(() => bridge.posted('/api/voice/memory_log').length > 0);
    expect(bridge.posted('/api/voice/memory_log').at(-1)).toMatchObject({
      user: 'what do you see on my desk',
      session_id: robot.sessionId,
    });
  }, 30_000);

  it('a [REMEMBER: …] marker is never spoken and reaches the bridge', async () => {
    const { robot, timeline } = await connected();
    local.script({ text: '😊 Nice to meet you, Sam. [REMEMBER: the user is called Sam]', chunkChars: 3 });
    await ask(robot, 'my name is Sam');
    const spoken = timeline
      .labels()
      .filter((l) => l.startsWith('sentence:'))
      .map((l) => l.slice('sentence:'.length));
    expect(spoken.join(' ')).toBe('Nice to meet you, Sam.');
    await eventually(() => bridge.posted('/api/voice/remember').length > 0);
    expect(bridge.posted('/api/voice/remember').at(-1)).toEqual({
      fact: 'the user is called Sam',
      session_id: robot.sessionId,
    });
  }, 30_000);

  it('a reply without an allowed emoji shows the 😐 face', async () => {
    const { robot, timeline } = await connected();
    local.script({ text: 'It is four o clock.' });
    await ask(robot, 'what time is it');
    expect(timeline.labels()).toContain('llm:neutral');
    const frame = timeline.entries.find(
      (e) => e.kind === 'frame' && e.frame.type === 'llm' && e.frame.emotion === 'neutral',
    );
    expect(frame?.kind === 'frame' && frame.frame.type === 'llm' && frame.frame.text).toBe('😐');
  }, 30_000);
});

describe('model failures never hang a turn', () => {
  it.each([
    ['HTTP 401', { status: 401 }],
    ['HTTP 500', { status: 500 }],
    ['a malformed stream', { text: '', malformed: true }],
    ['a stalled stream', { text: '😊 This never finishes because the stream stalls.', stallAfterChunks: 1 }],
    ['no answer at all', { delayMs: 5000 }],
  ])(
    '%s → a short spoken 😐 apology, and the next turn works',
    async (_name, script) => {
      const { robot, timeline } = await connected();
      local.script(script as any);
      const started = performance.now();
      await ask(robot, 'tell me something nice');
      expect(performance.now() - started).toBeLessThan(10_000);
      const labels = timeline.labels();
      expect(labels).toContain('llm:neutral');
      expect(labels.find((l) => l.startsWith('sentence:'))).toMatch(
        /^sentence:Sorry, I cannot think right now/,
      );

      timeline.clear();
      local.script({ text: '😊 All good again.' });
      await ask(robot, 'are you okay now');
      expect(timeline.labels()).toContain('sentence:All good again.');
    },
    30_000,
  );
});

describe('smart mode and the hot swap', () => {
  it('set-toggle smart_mode without a cloud key fails fast with 409 and nothing changes', async () => {
    const { robot } = await connected();
    const { status, json } = await post('set-toggle', {
      name: 'smart_mode',
      enabled: true,
      device_id: robot.deviceId,
    });
    expect(status).toBe(409);
    expect(json.error.code).toBe('no_cloud_key');
    expect(json.error.message).toContain('TWOTIER_CLOUD_API_KEY');
    expect(robot.model.toggles.smart_mode).toBe(false);
    expect(t.voice.toggles.smart_mode).toBe(false);
  });

  it('set-tier1slim-model refuses a blank key over a non-empty one (409), then swaps on a real one', async () => {
    const { robot } = await connected();
    const refused = await post('set-tier1slim-model', { model: 'big-cloud', url: cloud.url, api_key: '' });
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('blank_api_key');
    local.script({ text: '😊 Still the small model.' });
    await ask(robot, 'who is answering');
    expect(local.chatRequests().at(-1)!.body.model).toBe('small-4b');

    const swapped = await post('set-tier1slim-model', {
      model: 'big-cloud',
      url: cloud.url,
      api_key: 'cloud-key',
    });
    expect(swapped.status).toBe(200);
    expect(swapped.json.model).toMatchObject({ model: 'big-cloud', url: cloud.url });
    cloud.script({ text: '😊 Now the cloud model.' });
    const before = cloud.chatRequests().length;
    await ask(robot, 'who is answering now');
    expect(cloud.chatRequests().length).toBe(before + 1);
    expect(cloud.chatRequests().at(-1)!.headers.authorization).toBe('Bearer cloud-key');
    // back to the local endpoint for the other tests
    expect(
      (await post('set-tier1slim-model', { model: 'small-4b', url: local.url, api_key: 'local-key' })).status,
    ).toBe(200);
  }, 30_000);
});

describe.each([
  ['twotier', true],
  ['agent', false],
])('VOICE_PROVIDER=%s with a cloud key', (voiceProvider, flipsInProcess) => {
  let server: TestVoice;
  beforeAll(async () => {
    server = await startTestVoice({
      voice_provider: voiceProvider,
      bridge: { url: bridge.url },
      LLM: {
        TwoTier: {
          url: local.url,
          api_key: 'local-key',
          model: 'small-4b',
          cloud_url: cloud.url,
          cloud_api_key: 'cloud-key',
          smart_model: 'big-cloud',
        },
      },
    });
  }, 60_000);
  afterAll(async () => {
    await server.close();
  });

  it(flipsInProcess
    ? 'smart mode on switches the next turn to the cloud model, no restart'
    : 'smart mode only lights the pip', async () => {
    const robot = server.robot();
    await robot.start();
    await eventually(() => server.voice.registry.get(robot.deviceId));
    const flip = await fetch(`${server.httpUrl}/device/admin/set-toggle`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${server.voice.admin.token}` },
      body: JSON.stringify({ name: 'smart_mode', enabled: true }),
    });
    expect(flip.status).toBe(200);
    expect(robot.model.toggles.smart_mode).toBe(true); // the pip, through self.robot.set_toggle
    const localBefore = local.chatRequests().length;
    const cloudBefore = cloud.chatRequests().length;
    (flipsInProcess ? cloud : local).script({ text: '😊 Answer.' });
    const done = robot.waitFor(isStop, 20_000);
    robot.listen('detect', 'auto', 'which model are you');
    await done;
    if (flipsInProcess) {
      expect(cloud.chatRequests().length).toBe(cloudBefore + 1);
      expect(cloud.chatRequests().at(-1)!.body.model).toBe('big-cloud');
      expect(cloud.chatRequests().at(-1)!.headers.authorization).toBe('Bearer cloud-key');
      expect(local.chatRequests().length).toBe(localBefore);
    } else {
      expect(local.chatRequests().length).toBe(localBefore + 1);
      expect(cloud.chatRequests().length).toBe(cloudBefore);
    }
  }, 30_000);
});
