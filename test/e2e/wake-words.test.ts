// A `listen detect` carrying a wake word never becomes a model turn (stock xiaozhi clients send 你好小智 & co.
// on every connect). What the robot does is voice.wake_word_reply: a short greeting (default) or nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAi } from '../support/fake-openai.js';
import { connectRobot, eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let model: FakeOpenAi;
const servers: TestVoice[] = [];
let defaults: TestVoice | undefined;

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: '😊 Okay.' });
});
afterAll(async () => {
  for (const t of servers) await t.close();
  await model.close();
});

async function serverWith(voice: Record<string, unknown>): Promise<TestVoice> {
  const t = await startTestVoice({ LLM: { TwoTier: { url: model.url, model: 'fake-model' } }, voice });
  servers.push(t);
  return t;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('wake words in listen detect', () => {
  it.each(['你好小智', '嘿你好呀', 'hey pip'])(
    'the default greets %s with a spoken line and calls no model',
    async (word) => {
      defaults ??= await serverWith({});
      const t = defaults;
      const { robot, timeline } = await connectRobot(t);
      const calls = model.chatRequests().length;
      const stop = robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 15_000);
      robot.listen('detect', 'auto', word);
      await stop;
      const labels = timeline.labels();
      expect(labels[0]).toBe('stt');
      expect(labels).toContain('audio');
      expect(labels).not.toContain('llm:thinking');
      const stt = timeline.entries.find((e) => e.kind === 'frame' && e.frame.type === 'stt');
      expect(stt).toMatchObject({ frame: { text: word } });
      expect(model.chatRequests().length).toBe(calls);
      await eventually(() => robot.model.state === 'talk', 5000);
    },
    30_000,
  );

  it('wake_word_reply none: only the stt echo, no speech, no model call; a question after it is answered', async () => {
    const t = await serverWith({ wake_word_reply: 'none' });
    const { robot, timeline } = await connectRobot(t);
    const calls = model.chatRequests().length;
    robot.listen('detect', 'auto', '你好小智');
    await eventually(() => timeline.labels().includes('stt'), 5000);
    await sleep(500);
    expect(timeline.labels()).toEqual(['stt']);
    expect(model.chatRequests().length).toBe(calls);

    const answered = robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 15_000);
    robot.listen('detect', 'auto', 'what is the weather like');
    await answered;
    expect(model.chatRequests().length).toBe(calls + 1);
  }, 30_000);
});
