// Perception and modes with the virtual robot against the real voice server and bridge:
// a face greeting aborted when the face leaves, security journalling a photo, and story time timing out.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bridge } from '../../src/bridge/server.js';
import { startTestBridge } from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { JumpClock } from '../support/jump-clock.js';
import { freePort } from '../support/net.js';
import { connectRobot, eventually, startTestVoice, type TestVoice } from '../support/voice.js';

const GREETING =
  '😊 Hello there, it is lovely to see you again today. I hope you are having a wonderful morning with lots of sunshine and good things.';

let models: FakeOpenAi;
let vlm: FakeOpenAi;
let audio: FakeOpenAi;
let t: TestVoice;
let bridge: Bridge;
let clock: JumpClock;

beforeAll(async () => {
  models = await new FakeOpenAi().start();
  vlm = await new FakeOpenAi().start();
  vlm.responder = () => ({ text: 'An empty room with a sofa and a lamp.' });
  audio = await new FakeOpenAi().start();
  audio.responder = () => ({ text: 'A quiet electrical hum.' });
  clock = JumpClock.at(10); // inside the greeting hours
  const port = await freePort();
  const shared = {
    cloud: { api_key: 'cloud-key', url: audio.url },
    vision: { vlm_api_url: vlm.url },
    face_greet: { text: GREETING },
  };
  t = await startTestVoice({
    ...shared,
    bridge: { url: `http://127.0.0.1:${port}` },
    LLM: { TwoTier: { url: models.url } },
  });
  ({ bridge } = await startTestBridge(
    { ...shared, bridge: { port, voice_url: t.httpUrl } },
    {
      dataDir: t.dataDir,
      clock,
      consumers: { aborter: { graceMs: 1000 } },
      agentEnv: { AGENT_MODEL_URL: models.url },
    },
  ));
}, 60_000);

afterAll(async () => {
  clock?.stop();
  await bridge?.close();
  await t?.close();
  await Promise.all([models?.close(), vlm?.close(), audio?.close()]);
});

const connected = (faceLostGraceMs = 2000) =>
  connectRobot(t, { robot: { faceLostGraceMs }, userTools: true });

describe('face greeting', () => {
  it('a face appears → talk and a greeting; the face leaves → the greeting is aborted after the grace → idle', async () => {
    const { robot, timeline } = await connected();
    robot.firmware.faceAppears();
    expect(robot.model.state).toBe('talk'); // the firmware moves idle → talk on the face at once
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'sentence_start', 10_000);
    const started = performance.now();

    robot.firmware.faceLeaves(); // face_lost after 800 ms, the bridge's abort grace 1 s after that
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 10_000);
    const stoppedAfterMs = performance.now() - started;
    const spoken = timeline.labels().filter((l) => l.startsWith('sentence:'));
    expect(spoken[0]).toMatch(/^sentence:Hello there/);
    // The whole greeting takes far longer than loss grace + abort grace: it was cut short.
    expect(stoppedAfterMs).toBeLessThan(5000);
    expect(spoken.length).toBeLessThan(3);
    await eventually(() => robot.model.state === 'idle', 6000); // the firmware's face-lost grace
    // The bridge learns it from the relayed state_changed, a moment later.
    await eventually(async () => {
      const { devices } = (await fetch(`http://127.0.0.1:${bridge.port}/api/perception/devices`).then((r) =>
        r.json(),
      )) as any;
      return devices.find((d: any) => d.device_id === robot.deviceId)?.state === 'idle';
    }, 5000);
  }, 30_000);
});

describe('modes', () => {
  it('"keep watch" → security → a photo and the sound are described and journalled → a face → idle', async () => {
    const { robot } = await connected();
    const stt = robot.waitFor((f) => f.type === 'stt', 20_000);
    await robot.say('keep watch');
    expect(await stt).toMatchObject({ text: 'keep watch' });
    await eventually(() => robot.model.state === 'security', 10_000);
    const journalDir = join(t.dataDir, 'journal');
    const journal = await eventually(() => {
      const files = (() => {
        try {
          return readdirSync(journalDir);
        } catch {
          return [];
        }
      })();
      const text = files.map((f) => readFileSync(join(journalDir, f), 'utf8')).join('');
      return text.includes('An empty room with a sofa and a lamp.') ? text : undefined;
    }, 15_000);
    expect(journal).toContain(robot.deviceId);
    expect(journal).toContain('sound: A quiet electrical hum.');
    expect(vlm.requests.length).toBeGreaterThan(0);
    const caption = audio.chatRequests().at(-1)!.body;
    expect(caption.model).toBe('openai/gpt-4o-audio-preview');
    const part = caption.messages[0].content.find((p: any) => p.type === 'input_audio');
    expect(part.input_audio.format).toBe('wav');
    expect(part.input_audio.data.startsWith('UklGR')).toBe(true); // "RIFF": a real WAV of what the robot heard

    robot.firmware.faceAppears();
    await eventually(() => robot.model.state === 'idle', 5000);
  }, 60_000);

  it('"tell me a story" → story_time; 90 s of silence (on the bridge clock) → idle', async () => {
    const { robot } = await connected();
    await robot.say('tell me a story');
    await eventually(() => robot.model.state === 'story_time', 15_000);
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 15_000);
    // Silence counts from the last chat activity the bridge has seen: wait until it saw the robot go quiet.
    await eventually(async () => {
      const { devices } = (await fetch(`http://127.0.0.1:${bridge.port}/api/perception/devices`).then((r) =>
        r.json(),
      )) as any;
      const me = devices.find((d: any) => d.device_id === robot.deviceId);
      return me?.state === 'story_time' && me?.chat_status?.status === 'idle';
    }, 5000);
    clock.jump(60_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(robot.model.state).toBe('story_time'); // 60 s is not yet silence enough
    clock.jump(31_000);
    await eventually(() => robot.model.state === 'idle', 5000);
  }, 60_000);
});
