// The whole stack: voice server + bridge + the embedded ACP agent as a real child process + the virtual robot.
// One scripted OpenAI-compatible server stands in for every remote model: the small inner-loop model, the
// agent's model and the vision model.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bridge } from '../../src/bridge/server.js';
import type { VirtualRobot } from '../../src/device/robot.js';
import { startTestBridge } from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { freePort } from '../support/net.js';
import { connectRobot, eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let models: FakeOpenAi;
let vlm: FakeOpenAi;
let t: TestVoice;
let bridge: Bridge;
let bridgeUrl: string;

const hasImage = (body: any) => JSON.stringify(body?.messages ?? []).includes('"image_url"');

beforeAll(async () => {
  models = await new FakeOpenAi().start();
  vlm = await new FakeOpenAi().start();
  vlm.responder = () => ({ text: 'A red mug stands on a wooden desk.' });
  // The inner loop's requests carry tools; the agent's do not.
  models.responder = (body) => {
    if (body.tools) return { text: '😊 Okay.' };
    return {
      text: '😊 Hello from the agent. It is a fine day. I like talking. This is sentence four. And five. And six. And seven.',
    };
  };
  const port = await freePort();
  bridgeUrl = `http://127.0.0.1:${port}`;
  const shared = {
    cloud: { api_key: 'vision-key' },
    vision: { vlm_api_url: vlm.url, vlm_model: 'fake-vlm' },
    voice_provider: 'twotier' as const,
  };
  t = await startTestVoice({
    ...shared,
    bridge: { url: bridgeUrl },
    LLM: { TwoTier: { url: models.url, model: 'small' } },
  });
  // The embedded agent as a real child process.
  ({ bridge } = await startTestBridge(
    { ...shared, bridge: { port, voice_url: t.httpUrl } },
    { dataDir: t.dataDir, agentEnv: { AGENT_MODEL_URL: models.url, DATA_DIR: t.dataDir } },
  ));
  await eventually(async () => (await fetch(`${bridgeUrl}/health`)).ok, 20_000);
}, 60_000);

afterAll(async () => {
  await bridge?.close();
  await t?.close();
  await models?.close();
  await vlm?.close();
});

const connected = () => connectRobot(t, { userTools: true });

async function ask(robot: VirtualRobot, text: string): Promise<void> {
  const done = robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 30_000);
  robot.listen('detect', 'auto', text);
  await done;
}

describe('through the real bridge', () => {
  it('take_photo: camera → vision endpoint → vision model → the bridge → the small model → speech', async () => {
    const { robot, timeline } = await connected();
    models.script(
      { toolCalls: [{ name: 'take_photo', arguments: {} }] },
      { text: '😊 I can see a red mug on your desk.' },
    );
    await ask(robot, 'what can you see');

    const vision = vlm.requests.find((r) => hasImage(r.body))!;
    expect(vision.headers.authorization).toBe('Bearer vision-key');
    const image = vision.body.messages[0].content.find((part: any) => part.type === 'image_url').image_url
      .url as string;
    expect(image.startsWith('data:image/jpeg;base64,/9j/')).toBe(true); // a real JPEG from the robot's camera
    const second = models
      .chatRequests()
      .filter((r) => r.body.tools)
      .at(-1)!.body;
    expect(second.messages.at(-1)).toMatchObject({
      role: 'tool',
      content: 'A red mug stands on a wooden desk.',
    });
    expect(timeline.labels()).toContain('sentence:Let me take a look.');
    expect(timeline.labels()).toContain('sentence:I can see a red mug on your desk.');
  }, 60_000);

  it('memory round trip: a [REMEMBER] fact is found by memory_lookup on a later turn', async () => {
    const { robot } = await connected();
    models.script({ text: '😊 Nice, green tea it is. [REMEMBER: the user likes green tea]' });
    await ask(robot, 'I really like green tea');
    await eventually(async () => (await (await bridge.memory()).search('green tea')).length > 0, 5000);

    models.script(
      { toolCalls: [{ name: 'memory_lookup', arguments: { query: 'tea' } }] },
      { text: '😊 You like green tea.' },
    );
    await ask(robot, 'what do I like to drink');
    const toolResult = models
      .chatRequests()
      .filter((r) => r.body.tools)
      .at(-1)!
      .body.messages.at(-1);
    expect(toolResult.role).toBe('tool');
    expect(toolResult.content).toContain('the user likes green tea');
  }, 60_000);

  it('kid mode from the bridge lights the pip, reaches the small model, and denies the camera', async () => {
    const { robot } = await connected();
    const res = await fetch(`${bridgeUrl}/admin/kid-mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ enabled: true }),
    });
    expect(res.status).toBe(200);
    const kid = (await res.json()) as any;
    expect(kid.pushed, JSON.stringify(kid)).toBe(true);
    expect(robot.model.toggles.kid_mode).toBe(true);

    const visionCalls = vlm.requests.length;
    models.script(
      { toolCalls: [{ name: 'take_photo', arguments: {} }] },
      { text: '😊 I cannot look right now.' },
    );
    await ask(robot, 'look at me');
    const last = models
      .chatRequests()
      .filter((r) => r.body.tools)
      .at(-1)!.body;
    expect(last.messages.at(-1).content).toMatch(/kid mode/i);
    expect(vlm.requests.length).toBe(visionCalls);
    const userTurn = last.messages.filter((m: any) => m.role === 'user').at(-1).content;
    expect(userTurn).toMatch(/child/i); // the kid-aware turn suffix

    await fetch(`${bridgeUrl}/admin/kid-mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ enabled: false }),
    });
  }, 60_000);

  it('/api/message on the robot channel: sandwich to the agent, emoji prefix kept, MAX_SENTENCES', async () => {
    const response = await fetch(`${bridgeUrl}/api/message`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ content: 'tell me about your day', channel: 'deskbot' }),
    });
    expect(response.status).toBe(200);
    const { response: text } = (await response.json()) as { response: string };
    expect(text.startsWith('😊 Hello from the agent.')).toBe(true);
    expect(text.split(/(?<=[.!?])\s+/).length).toBe(6); // seven sentences cut to MAX_SENTENCES
    const agentRequest = models
      .chatRequests()
      .filter((r) => !r.body.tools)
      .at(-1)!.body;
    const userMessage = agentRequest.messages.at(-1).content as string;
    expect(userMessage).toContain('tell me about your day');
    expect(userMessage).toMatch(/English only/);
    expect(userMessage).toContain('😴');
  }, 60_000);
});
