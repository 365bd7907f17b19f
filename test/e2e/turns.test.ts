// Turn control through the real stack: manual mode, realtime barge-in, aborts (during a reply and during
// recognition), typed queries and wake words, noise dropping, and v2/v3 downlink framing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VirtualRobot } from '../../src/device/robot.js';
import type { BinaryVersion } from '../../src/protocol/index.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { connectRobot, eventually, startTestVoice, type TestVoice } from '../support/voice.js';

const LONG_ANSWER =
  '😊 Here is a long answer. It has many sentences so that speaking it takes several seconds. ' +
  'The robot keeps talking for a while. Then it talks some more about the weather. And finally it stops.';

let model: FakeOpenAi;
let t: TestVoice;

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: '😊 Okay.' });
  t = await startTestVoice({ LLM: { TwoTier: { url: model.url, model: 'fake-model' } } });
}, 60_000);

afterAll(async () => {
  await t.close();
  await model.close();
});

const connected = (options: Parameters<TestVoice['robot']>[0] = {}) => connectRobot(t, { robot: options });

const conversationOf = (robot: VirtualRobot) =>
  t.voice.conversationOf(t.voice.registry.get(robot.deviceId)!)!;
const isStop = (f: { type: string; state?: string }) => f.type === 'tts' && f.state === 'stop';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('listen modes', () => {
  it('manual mode: listen stop ends the utterance without any trailing silence', async () => {
    const { robot } = await connected();
    const stt = robot.waitFor((f) => f.type === 'stt', 15_000);
    await robot.say('go to sleep', { mode: 'manual', silenceMs: 0 });
    expect(await stt).toMatchObject({ text: 'go to sleep' });
    await eventually(() => robot.model.state === 'sleep', 10_000);
  }, 30_000);

  it('a wake word in listen detect moves the robot into talk and is greeted, never a model turn; other detect text is a typed query', async () => {
    const { robot, timeline } = await connected();
    const calls = model.chatRequests().length;
    const greeted = robot.waitFor(isStop, 15_000);
    robot.listen('detect', 'auto', 'Hi Pip');
    await greeted;
    await eventually(() => robot.model.state === 'talk', 5000);
    // As the reference server: the wake word echoed as stt, then the short greeting (no thinking face).
    expect(timeline.labels()).toEqual([
      'stt',
      'llm:happy',
      'tts:start',
      "sentence:Hi, I'm listening.",
      'audio',
      'tts:stop',
    ]);
    expect(model.chatRequests().length).toBe(calls);
    timeline.clear();

    model.script({ text: '😮 A typed answer.' });
    const done = robot.waitFor(isStop, 15_000);
    robot.listen('detect', 'auto', 'tell me something surprising');
    await done;
    expect(timeline.labels()).toEqual([
      'stt',
      'llm:thinking',
      'llm:surprised',
      'tts:start',
      'sentence:A typed answer.',
      'audio',
      'tts:stop',
    ]);
    // Every llm frame carries its face as text (clients print it), the thinking one included.
    const llmFrames = timeline.entries.flatMap((e) =>
      e.kind === 'frame' && e.frame.type === 'llm' ? [e.frame] : [],
    );
    expect(llmFrames.map((f) => [f.emotion, f.text])).toEqual([
      ['thinking', '🤔'],
      ['surprised', '😮'],
    ]);
  }, 30_000);

  it('noise (too short to be words) is dropped before any thinking animation or model call', async () => {
    const { robot, timeline } = await connected();
    const calls = model.chatRequests().length;
    robot.listen('detect', 'auto', '..');
    robot.listen('detect', 'auto', 'a');
    await sleep(300);
    expect(timeline.labels()).toEqual([]);
    expect(model.chatRequests().length).toBe(calls);
  });
});

describe('interruptions', () => {
  it('a device abort mid-reply stops it at once and nothing of that reply follows', async () => {
    const { robot, timeline } = await connected();
    model.script({ text: LONG_ANSWER });
    robot.listen('detect', 'auto', 'tell me a long story about nothing');
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'sentence_start', 15_000);
    await sleep(200);
    const stopped = robot.waitFor(isStop, 2000);
    const abortAt = performance.now();
    robot.abort('wake_word_detected');
    await stopped;
    const stopAt = timeline.entries.findLast((e) => e.kind === 'frame' && isStop(e.frame))!.at;
    expect(stopAt - abortAt).toBeLessThan(500);
    const countAfterStop = timeline.entries.filter((e) => e.at > stopAt).length;
    await sleep(1500);
    expect(timeline.entries.filter((e) => e.at > stopAt).length).toBe(countAfterStop);
    expect(countAfterStop).toBe(0);
    expect(robot.stats.audioDroppedNotSpeaking).toBe(0);
    expect(conversationOf(robot).turnState.replying).toBeNull();
  }, 30_000);

  it('an abort during recognition is not lost: the utterance never becomes a turn', async () => {
    const { robot, timeline } = await connected();
    const calls = model.chatRequests().length;
    const conversation = conversationOf(robot);
    const said = robot.say('what is the weather like today in the big city');
    await eventually(() => conversation.turnState.recognizing !== null, 10_000);
    robot.abort('user');
    await said;
    // The aborted recognition still ends (its decoder pass finishes, on a loaded machine late) and is dropped.
    await eventually(() => conversation.stats.dropped > 0, 15_000);
    await sleep(300);
    expect(timeline.labels()).not.toContain('stt');
    expect(timeline.labels()).not.toContain('llm:thinking');
    expect(model.chatRequests().length).toBe(calls);
  }, 30_000);

  it('realtime mode: new speech recognised while speaking interrupts the reply (barge-in)', async () => {
    const { robot, timeline } = await connected();
    model.script({ text: LONG_ANSWER }, { text: '😊 Second answer.' });
    robot.listen('start', 'realtime');
    await robot.say('what is the weather like today', { listen: false });
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'sentence_start', 15_000);
    const secondStt = robot.waitFor((f) => f.type === 'stt', 15_000);
    await robot.say('how are you', { listen: false });
    await secondStt;
    await robot.waitFor(
      (f) => f.type === 'tts' && f.state === 'sentence_start' && f.text === 'Second answer.',
      15_000,
    );
    const labels = timeline.labels();
    const second = labels.lastIndexOf('stt');
    // The first reply was cut off: its tts stop comes right before the second turn's stt.
    expect(labels.slice(second - 1, second + 1)).toEqual(['tts:stop', 'stt']);
    expect(labels.filter((l) => l.startsWith('sentence:')).length).toBeLessThan(6);
    expect(robot.stats.audioDroppedNotSpeaking).toBe(0);
    await robot.waitFor(isStop, 15_000);
  }, 45_000);
});

describe.each([2, 3] as BinaryVersion[])('downlink audio in binary protocol v%i', (version) => {
  it('reaches the robot framed exactly and decodes', async () => {
    const { robot } = await connected({ protocolVersion: version });
    const reply = new Promise<{ pcm: Int16Array }>((resolve) => robot.once('reply', resolve));
    const res = await fetch(`${t.httpUrl}/device/admin/say`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'Testing the framing.', device_id: robot.deviceId }),
    });
    expect(res.status).toBe(200);
    const { pcm } = await reply;
    expect(robot.stats.badPackets).toBe(0);
    expect(robot.stats.audioPackets).toBeGreaterThan(5);
    expect(pcm.length / 24_000).toBeGreaterThan(0.5);
  }, 30_000);
});
