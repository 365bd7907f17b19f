// Voice server admin routes against the real server and the virtual robot.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeWav } from '../../src/audio/wav.js';
import type { VirtualRobot } from '../../src/device/robot.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import type { Timeline } from '../support/timeline.js';
import { connectRobot, startTestVoice, type TestVoice } from '../support/voice.js';

let model: FakeOpenAi;
let t: TestVoice;

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  t = await startTestVoice({ LLM: { TwoTier: { url: model.url } } });
  mkdirSync(join(t.dataDir, 'songs'), { recursive: true });
  const tone = new Int16Array(16_000); // one second of 440 Hz at 16 kHz
  for (let i = 0; i < tone.length; i++)
    tone[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 16_000));
  writeFileSync(join(t.dataDir, 'songs', 'Happy Tune.wav'), encodeWav(tone, 16_000));
  writeFileSync(join(t.dataDir, 'secret.wav'), encodeWav(tone, 16_000));
}, 60_000);

afterAll(async () => {
  await t.close();
  await model.close();
});

async function post(path: string, body: unknown) {
  const response = await fetch(`${t.httpUrl}/device/admin/${path}`, {
    method: 'POST',
    // The bridge's token: set-toggle is accepted only from the bridge.
    headers: { 'content-type': 'application/json', authorization: `Bearer ${t.voice.admin.token}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as any };
}

const connected = () => connectRobot(t, { userTools: true });

const isStop = (f: { type: string; state?: string }) => f.type === 'tts' && f.state === 'stop';

describe('without a device', () => {
  it('answers 503 when none is connected and 404 for an unknown one, in the error shape', async () => {
    expect(t.voice.registry.size).toBe(0);
    const none = await post('inject-text', { text: 'hello' });
    expect(none.status).toBe(503);
    expect(none.json.error).toMatchObject({ code: 'no_device' });
    const unknown = await post('set-state', { state: 'sleep', device_id: 'aa:aa:aa:aa:aa:aa' });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('unknown_device');
  });
});

describe('with a device', () => {
  let robot: VirtualRobot;
  let timeline: Timeline;
  beforeAll(async () => {
    ({ robot, timeline } = await connected());
  }, 30_000);

  it.each([
    ['inject-text', {}, 'text'],
    ['inject-text', { text: '' }, 'text'],
    ['say', { text: 42 }, 'text'],
    ['set-state', { state: 'flying' }, 'state'],
    ['set-toggle', { name: 'turbo_mode', enabled: true }, 'name'],
    ['set-toggle', { name: 'kid_mode', enabled: 'yes' }, 'enabled'],
    ['set-head-angles', { yaw: 500 }, 'yaw'],
    ['set-head-angles', {}, 'body'],
    ['play-asset', {}, 'name'],
  ])('%s with %j → 400 naming %s', async (path, body, field) => {
    const { status, json } = await post(path, body);
    expect(status).toBe(400);
    expect(json.error.code).toBe('invalid_body');
    expect(json.error.message).toContain(field);
  });

  it('malformed JSON → 400 in the error shape', async () => {
    const { status, json } = await post('say', '{"text": ');
    expect(status).toBe(400);
    expect(json.error.code).toBe('malformed_json');
  });

  it('inject-text: the robot speaks the text as its own and moves into talk', async () => {
    robot.model.state = 'idle';
    const done = robot.waitFor(isStop, 15_000);
    const { status, json } = await post('inject-text', { text: '😊 Hello there. Nice to see you!' });
    expect(status).toBe(200);
    expect(json).toMatchObject({ ok: true, device_id: robot.deviceId });
    await done;
    expect(timeline.labels()).toEqual([
      'llm:happy',
      'tts:start',
      'sentence:Hello there.',
      'audio',
      'sentence:Nice to see you!',
      'audio',
      'tts:stop',
    ]);
    expect(robot.model.state).toBe('talk');
    expect(model.chatRequests()).toHaveLength(0);
  }, 20_000);

  it('say pre-empts current speech and plays the text verbatim', async () => {
    timeline.clear();
    await post('inject-text', {
      text: 'This is a long sentence that will take a few seconds to say out loud for everyone.',
    });
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'sentence_start', 10_000);
    const spoken = robot.waitFor(
      (f) => f.type === 'tts' && f.state === 'sentence_start' && f.text === 'Stop that, please',
      10_000,
    );
    expect((await post('say', { text: 'Stop that, please' })).status).toBe(200);
    await spoken;
    await robot.waitFor(isStop, 10_000);
    const labels = timeline.labels();
    const sayAt = labels.indexOf('sentence:Stop that, please');
    expect(labels.slice(sayAt - 2, sayAt)).toEqual(['tts:stop', 'tts:start']);
    expect(labels.at(-1)).toBe('tts:stop');
  }, 20_000);

  it('abort stops speech at once', async () => {
    await post('inject-text', { text: 'Another long sentence that takes quite a while to say out loud.' });
    await robot.waitFor((f) => f.type === 'tts' && f.state === 'start', 10_000);
    const stopped = robot.waitFor(isStop, 1000);
    const { json } = await post('abort', {});
    expect(json).toMatchObject({ ok: true, aborted: true });
    await stopped;
  }, 20_000);

  it('songs lists the assets and play-asset plays one, paced like speech', async () => {
    const songs = await (await fetch(`${t.httpUrl}/device/admin/songs`)).json();
    expect(songs).toEqual({ songs: [{ name: 'Happy Tune', file: 'Happy Tune.wav', bytes: 32_044 }] });
    timeline.clear();
    const reply = new Promise<{ pcm: Int16Array }>((resolve) => robot.once('reply', resolve));
    const started = performance.now();
    expect((await post('play-asset', { name: 'happy tune' })).status).toBe(200);
    const { pcm } = await reply;
    expect(timeline.labels()).toEqual(['tts:start', 'sentence:Happy Tune', 'audio', 'tts:stop']);
    expect(pcm.length / 24_000).toBeGreaterThan(0.9);
    expect(performance.now() - started).toBeGreaterThan(700); // paced in real time, not dumped
  }, 20_000);

  it.each([
    ['../secret', 400, 'unsafe_name'],
    ['..', 400, 'unsafe_name'],
    ['songs/../../secret.wav', 400, 'unsafe_name'],
    ['/etc/passwd', 400, 'unsafe_name'],
    ['secret', 404, 'unknown_asset'],
  ])('play-asset refuses %s', async (name, status, code) => {
    const reply = await post('play-asset', { name });
    expect(reply.status).toBe(status);
    expect(reply.json.error.code).toBe(code);
  });

  it('set-state, set-toggle, set-head-angles and set-face-identified reach the device tools', async () => {
    const state = await post('set-state', { state: 'security' });
    expect(state.status).toBe(200);
    expect(state.json).toMatchObject({ ok: true, tool: 'self.robot.set_state' });
    expect(robot.model.state).toBe('security');
    expect((await post('set-toggle', { name: 'kid_mode', enabled: true })).status).toBe(200);
    expect(robot.model.toggles.kid_mode).toBe(true);
    expect((await post('set-head-angles', { yaw: -30, pitch: 10 })).status).toBe(200);
    expect(robot.model.head).toEqual({ yaw: -30, pitch: 10 });
    expect((await post('set-face-identified', {})).status).toBe(200);
    expect(robot.model.faceIdentifiedAt).not.toBeNull();
  });

  it('take-photo: the camera uploads to the vision endpoint; with no vision key the answer says so', async () => {
    const photo = await post('take-photo', { question: 'what is on the desk?' });
    expect(photo.status).toBe(200);
    expect(photo.json.tool).toBe('self.camera.take_photo');
    expect(JSON.parse(photo.json.result)).toEqual({
      success: false,
      message: expect.stringMatching(/vision is unavailable/),
    });
  });

  it('a device error is a 502 with the device message', async () => {
    robot.model.cameraEnabled = false;
    const photo = await post('take-photo', { question: 'anything?' });
    robot.model.cameraEnabled = true;
    expect(photo.status).toBe(502);
    expect(photo.json.error.code).toBe('device_error');
    expect(photo.json.error.message).toContain('The camera is disabled');
  });

  it('devices lists the robot with its state and tools', async () => {
    const { devices } = (await (await fetch(`${t.httpUrl}/device/admin/devices`)).json()) as any;
    expect(devices).toEqual([
      expect.objectContaining({ device_id: robot.deviceId, robot_state: 'security' }),
    ]);
    expect(devices[0].tools).toContain('self.robot.set_state');
  });
});
