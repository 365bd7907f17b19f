// Audio end to end: espeak-ng speech → Opus → WebSocket → Silero VAD → pocketsphinx → turn → espeak-ng →
// Opus back, with the scripted model server standing in for the language model.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { resample } from '../../src/audio/resample.js';
import type { VirtualRobot } from '../../src/device/robot.js';
import { PocketsphinxAsr } from '../../src/providers/asr/pocketsphinx.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { Timeline } from '../support/timeline.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let model: FakeOpenAi;
let t: TestVoice;
let robot: VirtualRobot;
let timeline: Timeline;

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: '😊 It is sunny.' });
  t = await startTestVoice({ LLM: { TwoTier: { url: model.url, model: 'fake-model' } } });
  robot = t.robot();
  timeline = new Timeline(robot);
  await robot.start();
  await eventually(() => t.voice.conversationOf(t.voice.registry.get(robot.deviceId)!));
}, 60_000);

afterAll(async () => {
  await t.close();
  await model.close();
});

beforeEach(() => timeline.clear());

describe('a spoken turn', () => {
  it('"go to sleep" is recognised, sent as stt, and puts the robot to sleep over MCP', async () => {
    const stt = robot.waitFor((f) => f.type === 'stt', 20_000);
    await robot.say('go to sleep');
    expect(await stt).toMatchObject({ type: 'stt', text: 'go to sleep' });
    await eventually(() => robot.model.state === 'sleep', 10_000);
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 10_000);
    expect(model.chatRequests()).toHaveLength(0); // a voice phrase never reaches the model
  }, 30_000);

  it('a question goes to the model; the robot sees every frame in order and hears the answer', async () => {
    robot.model.state = 'idle';
    const reply = new Promise<{ pcm: Int16Array; sentences: string[] }>((resolve) =>
      robot.once('reply', resolve),
    );
    await robot.say('what is the weather like today');
    const { pcm, sentences } = await reply;

    const labels = timeline.labels();
    expect(labels).toEqual([
      'stt',
      'llm:thinking',
      'llm:happy',
      'tts:start',
      'sentence:It is sunny.',
      'audio',
      'tts:stop',
    ]);
    const stt = timeline.entries.find((e) => e.kind === 'frame' && e.frame.type === 'stt');
    expect(stt?.kind === 'frame' && stt.frame.type === 'stt' && stt.frame.text).toContain('weather');
    expect(sentences).toEqual(['It is sunny.']);
    const emotion = timeline.entries.find(
      (e) => e.kind === 'frame' && e.frame.type === 'llm' && e.frame.emotion === 'happy',
    );
    expect(emotion?.kind === 'frame' && emotion.frame.type === 'llm' && emotion.frame.text).toBe('😊');

    // The model got the user's words and the persona.
    const last = model.chatRequests().at(-1)!.body;
    expect(last.stream).toBe(true);
    expect(last.messages.at(-1)).toMatchObject({ role: 'user' });
    expect(last.messages.at(-1).content).toContain('weather');

    // What the robot decoded is speech that says the answer.
    expect(pcm.length / 24_000).toBeGreaterThan(0.5);
    const listener = new PocketsphinxAsr({
      commands: ['it is sunny', 'go to sleep', 'good morning', 'keep watch', 'hello there'],
    });
    const heard = await listener.transcribe(resample(pcm, 24_000, 16_000), new AbortController().signal);
    expect(heard).toBe('it is sunny');
  }, 30_000);
});
