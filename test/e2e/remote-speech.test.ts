// The OpenAI-compatible speech providers through the real voice server: the robot's utterance is cut by the
// real VAD, transcribed by /v1/audio/transcriptions and answered with /v1/audio/speech audio.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FakeOpenAi } from '../support/fake-openai.js';
import { Timeline } from '../support/timeline.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let remote: FakeOpenAi;
let t: TestVoice;

beforeAll(async () => {
  remote = await new FakeOpenAi().start();
  remote.transcription = 'what is the weather like today';
  remote.responder = () => ({ text: '😊 It is sunny.' });
  t = await startTestVoice({
    selected_module: { ASR: 'openai', TTS: 'openai', LLM: 'CompatLLM' },
    ASR: { openai: { url: remote.url, api_key: 'asr-key', model: 'whisper-test' } },
    TTS: { openai: { url: remote.url, api_key: 'tts-key', model: 'tts-test', voice: 'nova' } },
    LLM: { CompatLLM: { url: remote.url } },
  });
}, 60_000);

afterAll(async () => {
  await t.close();
  await remote.close();
});

it('transcription and speech come from the remote endpoints, with 20 ms uplink frames', async () => {
  const robot = t.robot();
  const timeline = new Timeline(robot);
  await robot.start();
  await eventually(() => t.voice.conversationOf(t.voice.registry.get(robot.deviceId)!));
  timeline.clear();
  const reply = new Promise<{ pcm: Int16Array }>((resolve) => robot.once('reply', resolve));
  const { speechPcm16k } = await import('../../src/device/voice.js');
  const speech = await speechPcm16k('hello robot how are you');
  const withSilence = new Int16Array(speech.length + 16_000);
  withSilence.set(speech);
  robot.listen('start', 'auto');
  await robot.sendPcm(withSilence, { paced: false, frameMs: 20 });
  const { pcm } = await reply;

  expect(timeline.labels()).toEqual([
    'stt',
    'llm:thinking',
    'llm:happy',
    'tts:start',
    'sentence:It is sunny.',
    'audio',
    'tts:stop',
  ]);
  const asr = remote.requests.find((r) => r.path.endsWith('/audio/transcriptions'))!;
  expect(asr.headers.authorization).toBe('Bearer asr-key');
  expect(asr.headers['content-type']).toMatch(/^multipart\/form-data/);
  const form = (asr.body as Buffer).toString('latin1');
  expect(form).toContain('whisper-test');
  expect(form).toContain('RIFF'); // the utterance went up as a WAV file
  const tts = remote.requests.find((r) => r.path.endsWith('/audio/speech'))!;
  expect(tts.headers.authorization).toBe('Bearer tts-key');
  expect(tts.body).toMatchObject({
    model: 'tts-test',
    voice: 'nova',
    input: 'It is sunny.',
    response_format: 'pcm',
  });
  // 12 characters × 50 ms of tone = 0.6 s, decoded by the robot at 24 kHz
  expect(pcm.length / 24_000).toBeGreaterThan(0.5);
}, 30_000);
