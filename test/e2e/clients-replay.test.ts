// Real clients against the real voice server: for every client recorded under test/fixtures/clients/ (the ESP32
// firmware 1.x and 2.x, the xiaozhi-esp32-server browser test page, py-xiaozhi, the XiaoZhiSharp PC client) its
// OTA request, its upgrade headers or query string, its hello and MCP answers, its wake-word sequence and a spoken
// question (espeak-ng → Opus at its frame duration, sample rate and binary framing), plus what only it does:
// interruptions, typed questions, empty binary frames, pings. The model is the scripted fake; nothing else is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerFrame } from '../../src/protocol/index.js';
import {
  type ClientFixture,
  clientNames,
  heardSamples,
  loadClient,
  postOta,
  ReplayClient,
  type Speech,
} from '../support/client-replay.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

const QUESTION = 'what is the weather like today';
/** What the wake-word pre-roll audio (the ~2 s the firmware keeps around its wake word) says. */
const PREROLL = 'hello robot';
const ANSWER = '😊 It is sunny today.';
const ANSWER_LABELS = [
  'stt',
  'llm:thinking',
  'llm:happy',
  'tts:start',
  'sentence:It is sunny today.',
  'audio',
  'tts:stop',
];
const LONG_ANSWER =
  '😊 Here is a long answer. It has many sentences so that speaking it takes several seconds. ' +
  'The robot keeps talking for a while. Then it talks some more about the weather. And finally it stops.';
const TYPED = 'tell me about the weather';

let model: FakeOpenAi;
let t: TestVoice;

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: ANSWER });
  t = await startTestVoice({ LLM: { TwoTier: { url: model.url, model: 'fake-model' } } });
}, 60_000);

afterAll(async () => {
  await t?.close();
  await model?.close();
});

const chatCalls = () => model.chatRequests().length;
const isStop = (f: ServerFrame) => f.type === 'tts' && f.state === 'stop';
const isSentence = (f: ServerFrame) => f.type === 'tts' && f.state === 'sentence_start';
const sessionOf = (fixture: ClientFixture) => t.voice.registry.get(fixture.profile.mac);
const conversationOf = (fixture: ClientFixture) => t.voice.conversationOf(sessionOf(fixture)!)!;

/** Waits until the server has nothing in flight for this client and has sent nothing for `quietMs`. */
async function quiet(client: ReplayClient, quietMs = 400): Promise<void> {
  let seen = -1;
  let since = performance.now();
  await eventually(() => {
    const count = client.frames.length + client.timeline.entries.length;
    if (count !== seen) {
      seen = count;
      since = performance.now();
      return false;
    }
    const turn = conversationOf(client.fixture).turnState;
    return turn.replying === null && turn.recognizing === null && performance.now() - since >= quietMs;
  }, 20_000);
}

/** Plays a sequence that asks something and waits for the reply's tts stop (the timeline holds only that turn). */
async function ask(client: ReplayClient, sequence: string, speech: Speech): Promise<void> {
  await quiet(client);
  client.timeline.clear();
  const stop = client.waitFor(isStop, 30_000);
  await client.play(sequence, speech);
  await stop;
}

/** Asks the spoken question with a long scripted answer and returns once its first sentence is being heard. */
async function startLongReply(client: ReplayClient): Promise<void> {
  await quiet(client);
  model.script({ text: LONG_ANSWER });
  client.timeline.clear();
  const sentence = client.waitFor(isSentence, 30_000);
  await client.play('question', { question: QUESTION });
  await sentence;
  await eventually(() => heardSamples(client.timeline) > 0, 5000);
}

/** What the client sends once a reply has ended (tts stop), as it does. */
async function afterReplies(client: ReplayClient): Promise<void> {
  if (client.timeline.labels().includes('tts:stop')) await client.play('afterReply');
}

const frameOf = <T extends ServerFrame['type']>(
  client: ReplayClient,
  type: T,
  pick = (_f: ServerFrame) => true,
) =>
  client.timeline.entries.find((e) => e.kind === 'frame' && e.frame.type === type && pick(e.frame)) as
    | { kind: 'frame'; frame: Extract<ServerFrame, { type: T }> }
    | undefined;

for (const name of clientNames()) {
  const fixture = loadClient(name);
  const { profile, sequences, mcp } = fixture;

  describe(`${name} (${profile.client})`, () => {
    let client: ReplayClient;

    afterAll(() => client?.close());

    it.each(fixture.ota.requests.map((request, index) => [request.label, index] as const))(
      'OTA as recorded (%s) → 200 with a websocket url and no mqtt section',
      async (_label, index) => {
        const reply = await postOta(t.otaUrl, fixture, index);
        expect(reply.status, JSON.stringify(reply.json)).toBe(200);
        expect(reply.json.websocket?.url).toMatch(/^ws:\/\/[^/]+\/device\/v1\/$/);
        expect(reply.json).not.toHaveProperty('mqtt');
      },
    );

    it('connects as it does, says its hello, gets the server hello; MCP discovery gets its answers', async () => {
      const boot = await postOta(t.otaUrl, fixture);
      expect(boot.status, JSON.stringify(boot.json)).toBe(200);
      client = await ReplayClient.connect(boot.json.websocket.url, fixture);
      expect(client.serverHello).toMatchObject({
        type: 'hello',
        transport: 'websocket',
        session_id: expect.any(String),
        audio_params: { format: 'opus', sample_rate: 24_000, channels: 1, frame_duration: 60 },
      });
      const session = await eventually(() => sessionOf(fixture));
      expect(session.info).toMatchObject({
        binaryVersion: profile.binaryVersion,
        clientId: profile.clientId,
      });

      const lists = () => client.mcpRequests.filter((r) => r.method === 'tools/list').length;
      await eventually(() => lists() >= 2, 15_000);
      expect(client.mcpRequests[0]).toMatchObject({
        method: 'initialize',
        params: {
          capabilities: { vision: { url: expect.stringMatching(/^http:\/\//), token: expect.any(String) } },
        },
      });
      await eventually(() => session.tools.length === mcp.tools.length, 5000);
      expect(session.tools.map((tool) => tool.name)).toEqual(mcp.tools.map((tool) => tool.name));
      expect(session.userTools.map((tool) => tool.name)).toEqual(
        mcp.honoursWithUserTools ? mcp.userOnlyTools.map((tool) => tool.name) : [],
      );
    }, 30_000);

    if (sequences.wake!.length > 0) {
      it(`wake word (${profile.wakeWord}): its wake sequence is accepted and never becomes a model call`, async () => {
        const calls = chatCalls();
        const utterances = conversationOf(fixture).stats.utterances;
        client.timeline.clear();
        await client.play('wake', { wakeWord: PREROLL });
        await quiet(client);
        expect(chatCalls(), 'model requests after the wake word').toBe(calls);
        expect(client.timeline.labels()).not.toContain('llm:thinking');
        // Audio before any `listen start` (the firmware's pre-roll) is never a turn of its own.
        expect(conversationOf(fixture).stats.utterances).toBe(utterances);
        await afterReplies(client);
      }, 30_000);
    }

    it(`a spoken question (${profile.frameMs} ms frames at ${profile.uplinkSampleRate} Hz, binary v${profile.binaryVersion}, ${profile.listenMode}) is answered with every frame in order`, async () => {
      await ask(client, 'question', { question: QUESTION });
      expect(client.timeline.labels()).toEqual(ANSWER_LABELS);
      expect(frameOf(client, 'stt')?.frame.text).toContain('weather');
      expect(frameOf(client, 'llm', (f) => f.type === 'llm' && f.emotion === 'thinking')?.frame.text).toBe(
        '🤔',
      );
      expect(frameOf(client, 'llm', (f) => f.type === 'llm' && f.emotion === 'happy')?.frame.text).toBe('😊');
      expect(client.badAudio).toEqual([]);
      expect(heardSamples(client.timeline) / 24_000).toBeGreaterThan(0.5);
      await afterReplies(client);
    }, 40_000);

    if (sequences.interrupt) {
      it('while the robot speaks, its interruption (abort wake_word_detected) stops the reply at once', async () => {
        const calls = chatCalls();
        await startLongReply(client);
        const stop = client.waitFor(isStop, 3000);
        const abortAt = performance.now();
        await client.play('interrupt');
        await stop;
        expect(performance.now() - abortAt).toBeLessThan(1500);
        await quiet(client);

        const labels = client.timeline.labels();
        const after = labels.slice(labels.indexOf('tts:stop') + 1);
        const nextReply = after.indexOf('tts:start');
        expect(nextReply === -1 ? after : after.slice(0, nextReply), 'audio after tts stop').not.toContain(
          'audio',
        );
        expect(labels).not.toContain('sentence:And finally it stops.');
        expect(chatCalls()).toBe(calls + 1);
        await afterReplies(client);
      }, 40_000);
    }

    if (sequences.typed) {
      it('a typed question (listen detect with its text) is answered like a spoken one', async () => {
        await ask(client, 'typed', { text: TYPED });
        expect(client.timeline.labels()).toEqual(ANSWER_LABELS);
        expect(frameOf(client, 'stt')?.frame.text).toBe(TYPED);
        await afterReplies(client);
      }, 40_000);
    }

    if (sequences.typedWhileSpeaking) {
      it('typing while the robot speaks (abort, then listen detect with the text) replaces the reply', async () => {
        await startLongReply(client);
        const answered = client.waitFor(
          (f) => f.type === 'tts' && f.state === 'sentence_start' && f.text === 'It is sunny today.',
          15_000,
        );
        await client.play('typedWhileSpeaking', { text: TYPED });
        await answered;
        await client.waitFor(isStop, 15_000);

        const labels = client.timeline.labels();
        expect(labels.slice(labels.indexOf('tts:stop') + 1)).toEqual(ANSWER_LABELS);
        expect(frameOf(client, 'stt', (f) => f.type === 'stt' && f.text === TYPED)).toBeDefined();
        await afterReplies(client);
      }, 40_000);
    }

    it('the server rejected none of its frames and sent it nothing it cannot parse', async () => {
      await quiet(client);
      expect(sessionOf(fixture)?.stats.rejectedFrames).toBe(0);
      expect(client.badFrames).toEqual([]);
      expect(client.open).toBe(true);
    });

    if (profile.pingIntervalMs) {
      it(`pings (every ${profile.pingIntervalMs / 1000} s) are answered and keep an otherwise silent client connected`, async () => {
        // Scaled down: the idle timeout is 1 s here (300 s by default) and the client pings 4 times a second.
        const idle = await startTestVoice({ server: { idle_timeout_sec: 1 } });
        const silent = { ...fixture, profile: { ...profile, mac: '02:50:59:00:00:ff' } };
        try {
          const url = (await postOta(idle.otaUrl, fixture)).json.websocket.url;
          const pinging = await ReplayClient.connect(url, fixture);
          const control = await ReplayClient.connect(url, silent);
          const timer = setInterval(() => pinging.ping(), 250);
          await new Promise((resolve) => setTimeout(resolve, 3000));
          clearInterval(timer);
          expect(pinging.pongs).toBeGreaterThanOrEqual(8);
          expect(pinging.open, 'the pinging client is still connected').toBe(true);
          expect(idle.voice.registry.get(profile.mac)).toBeDefined();
          expect(control.closedWith, 'the silent client was closed as idle').toBe(4002);
          pinging.close();
        } finally {
          await idle.close();
        }
      }, 30_000);
    }
  });
}
