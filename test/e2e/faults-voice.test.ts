// Faults on the voice path, through the real voice server and the virtual robot: the model endpoint refusing,
// answering 401/500, too slow, streaming garbage or stalling; the speech engine failing; the device leaving
// mid-reply or mid-recognition. Every turn ends within its deadline with a clear reason in the log, and
// nothing is left behind once the device has gone: live handles back to the baseline, no session, no turn
// state in the conversation, no queued frames, no open model request.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { VirtualRobot } from '../../src/device/robot.js';
import type { TwoTierLlm } from '../../src/providers/llm/twotier.js';
import { OpenAiTts } from '../../src/providers/tts/openai.js';
import type { Conversation } from '../../src/voice/conversation.js';
import { MODEL_FAILURE_REPLY } from '../../src/voice/reply.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { type FaultVoice, reconnect, ShortTts, startFaultVoice } from '../support/fault-voice.js';
import {
  type Baseline,
  backToBaseline,
  baseline,
  LogCapture,
  type RawHandler,
  RawServer,
  raw,
} from '../support/faults.js';
import { freePort } from '../support/net.js';
import type { Timeline } from '../support/timeline.js';
import { connectRobot, eventually } from '../support/voice.js';

/** TwoTier's per-request deadline in this suite (LLM.TwoTier.timeout), and the speech engine's. */
const DEADLINE_MS = 2000;
/** Slack on top of a deadline: the apology's playout, the stop margin, a loaded machine. */
const MARGIN_MS = 6000;
const APOLOGY = `sentence:${MODEL_FAILURE_REPLY.replace(/^😐 /, '')}`;

const logs = new LogCapture();
let model: FakeOpenAi;
let rawModel: RawServer;
let t: FaultVoice;
let twoTier: TwoTierLlm;

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  rawModel = await new RawServer().start();
  t = await startFaultVoice(
    {
      voice_provider: 'twotier',
      LLM: { TwoTier: { url: model.url, api_key: 'k', model: 'small', timeout: DEADLINE_MS / 1000 } },
    },
    logs.logger,
  );
  twoTier = t.configured.llm as TwoTierLlm;
  // One robot boots once; every test reconnects it, as a device does after losing its connection.
  ({ robot, timeline } = await connectRobot(t));
  robot.dropConnection();
  await eventually(() => t.voice.registry.size === 0);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await model?.close();
  await rawModel?.close();
});

const isStop = (f: { type: string; state?: string }) => f.type === 'tts' && f.state === 'stop';

interface Connected {
  robot: VirtualRobot;
  timeline: Timeline;
  conversation: Conversation;
  before: Baseline;
}

let robot: VirtualRobot;
let timeline: Timeline;

async function connected(): Promise<Connected> {
  const before = baseline([model.url, rawModel.url]);
  const conversation = await reconnect(t, robot);
  timeline.clear();
  return { robot, timeline, conversation, before };
}

// A failed test must not leave the robot connected for the next one's checks.
afterEach(async () => {
  robot.dropConnection();
  await eventually(() => t.voice.registry.size === 0);
});

/** A typed turn; resolves with how long it took to its `tts stop`. */
async function ask(robot: VirtualRobot, text: string): Promise<number> {
  const started = performance.now();
  const stop = robot.waitFor(isStop, DEADLINE_MS + MARGIN_MS);
  robot.listen('detect', 'auto', text);
  await stop;
  return performance.now() - started;
}

/** The device leaves; then nothing of it may remain anywhere. */
async function leaveAndCheck({ robot, conversation, before }: Connected): Promise<void> {
  robot.dropConnection();
  await eventually(() => t.voice.registry.size === 0).catch(() => {
    throw new Error(`${t.voice.registry.size} sessions still registered`);
  });
  await eventually(() => Object.values(conversation.debugCounts()).every((n) => n === 0)).catch(() => {
    throw new Error(`conversation still holds ${JSON.stringify(conversation.debugCounts())}`);
  });
  expect(rawModel.openResponses).toBe(0);
  await eventually(() => modelRequestsOpen() === 0).catch(() => {
    throw new Error(`the fake model still has ${modelRequestsOpen()} open responses`);
  });
  await backToBaseline(before);
}

/** Chat responses the fake has not finished or seen closed. */
const modelRequestsOpen = () => (model as unknown as { open: Set<unknown> }).open.size;

const useModel = (url: string) => twoTier.hotSwap({ model: 'small', url, apiKey: 'k' });

describe('the model endpoint fails: a spoken 😐 apology within the deadline, the reason in the log', () => {
  it('connection refused, asked out loud (microphone audio → VAD → ASR → model)', async () => {
    const c = await connected();
    useModel(`http://127.0.0.1:${await freePort()}/v1`);
    const mark = logs.mark;
    const stop = c.robot.waitFor(isStop, 20_000);
    const started = performance.now();
    await c.robot.say('what is the weather like today');
    await stop;
    useModel(model.url);
    expect(performance.now() - started).toBeLessThan(DEADLINE_MS + MARGIN_MS + 5000); // + recognition
    const labels = c.timeline.labels();
    expect(labels[0]).toBe('stt');
    expect(labels).toContain('llm:neutral');
    expect(labels).toContain(APOLOGY);
    expect(labels.at(-1)).toBe('tts:stop');
    expect(logs.find('model failed during a turn', /cannot reach .*ECONNREFUSED/, mark)).toHaveLength(1);
    await leaveAndCheck(c);
  }, 30_000);

  it.each([
    ['HTTP 401', () => model.script({ status: 401 }), /HTTP 401/],
    ['HTTP 500', () => model.script({ status: 500 }), /HTTP 500/],
    ['no answer within the deadline', () => useModel(hang()), /no (complete answer|response) within 2000 ms/],
    [
      'a stream that stalls after its first chunk',
      () => model.script({ text: '😊 This never ends because the stream stalls.', stallAfterChunks: 1 }),
      /stream silent for 2000 ms|no complete answer within 2000 ms/,
    ],
    [
      'garbage lines, then a chunk that is not JSON',
      () =>
        useModel(
          serve(
            raw.sse([
              ': a comment line',
              'event: nonsense',
              'garbage without a field name',
              'data: {"choices": [ this is not json',
            ]),
          ),
        ),
      /malformed stream chunk/,
    ],
    [
      'a 200 that is an HTML page, not a stream',
      () => useModel(serve(raw.html())),
      /the model returned no text/,
    ],
    [
      'an error chunk after the 200',
      () => useModel(serve(raw.sse(['data: {"error":{"message":"upstream overloaded"}}']))),
      /error in the stream .*upstream overloaded/,
    ],
    [
      'a line that never ends',
      () =>
        useModel(
          serve((_req, res) => {
            res.writeHead(200, { 'content-type': 'text/event-stream', connection: 'close' });
            res.end(`data: ${'x'.repeat(1_100_000)}`);
          }),
        ),
      /stream line longer than/,
    ],
  ])(
    '%s',
    async (_name, arrange, reason) => {
      const c = await connected();
      const mark = logs.mark;
      arrange();
      const took = await ask(c.robot, 'tell me something nice');
      useModel(model.url);
      expect(took).toBeLessThan(DEADLINE_MS + MARGIN_MS);
      const labels = c.timeline.labels();
      expect(labels.slice(0, 3)).toEqual(['stt', 'llm:thinking', 'llm:neutral']);
      expect(labels, labels.join(' | ')).toContain(APOLOGY);
      expect(labels.at(-1)).toBe('tts:stop');
      const logged = logs.find('model failed during a turn', reason, mark);
      expect(logged, JSON.stringify(logs.entries.slice(mark))).toHaveLength(1);
      await leaveAndCheck(c);
    },
    30_000,
  );
});

describe('the speech engine fails', () => {
  it.each([
    ['HTTP 500', () => serve(raw.status(500)), /HTTP 500/],
    ['no answer within its deadline', () => hang(), /no (complete answer|response) within 2000 ms/],
  ])(
    '%s: the turn ends with tts stop, the reason logged, the model request closed',
    async (_n, url, reason) => {
      const c = await connected();
      const mark = logs.mark;
      t.tts.current = new OpenAiTts({ url: url(), model: 'tts', voice: 'v', timeoutSec: DEADLINE_MS / 1000 });
      // A long, slow answer: the model is still streaming when speech fails, and must be stopped.
      model.script({ text: `😊 ${'This is a long answer. '.repeat(12)}`, chunkChars: 6, chunkDelayMs: 50 });
      const chats = model.chatRequests().length;
      try {
        const took = await ask(c.robot, 'say something');
        expect(took).toBeLessThan(DEADLINE_MS + MARGIN_MS);
      } finally {
        t.tts.current = new ShortTts();
      }
      expect(c.timeline.labels()).toEqual(['stt', 'llm:thinking', 'llm:happy', 'tts:stop']);
      expect(model.chatRequests().length).toBe(chats + 1);
      expect(logs.find('speech synthesis failed during a turn; reply cut short', reason, mark)).toHaveLength(
        1,
      );
      await eventually(() => modelRequestsOpen() === 0, 1000);
      await leaveAndCheck(c);
    },
    30_000,
  );
});

describe('the device leaves', () => {
  it('mid-reply: the model request is closed, speech and pacing stop, no frame stays queued', async () => {
    const c = await connected();
    model.script({
      text: `😊 ${'Here is one more sentence for you. '.repeat(15)}`,
      chunkChars: 4,
      chunkDelayMs: 40,
    });
    c.robot.listen('detect', 'auto', 'tell me a long story');
    await c.robot.waitFor((f) => f.type === 'tts' && f.state === 'sentence_start', DEADLINE_MS + MARGIN_MS);
    expect(modelRequestsOpen()).toBe(1); // still streaming
    c.robot.dropConnection();
    // The fake sees the client close: the model request was aborted, not read to its end.
    await eventually(() => modelRequestsOpen() === 0, 2000);
    await leaveAndCheck(c);
    expect(c.conversation.stats.aborted).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it('mid-recognition: the late transcript starts no turn for nobody', async () => {
    const c = await connected();
    const chats = model.chatRequests().length;
    const mark = logs.mark;
    t.asr.hold = true;
    const started = t.asr.started;
    try {
      await c.robot.say('what is the weather like today');
      await eventually(() => t.asr.started > started, 10_000);
      c.robot.dropConnection();
      await eventually(() => t.voice.registry.size === 0);
    } finally {
      t.asr.hold = false;
      t.asr.release();
    }
    // The transcript arrives after the device left; a turn started from it would reach the model at once.
    await eventually(() => t.asr.finished === t.asr.started, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(logs.find('recognized', undefined, mark)).toHaveLength(1);
    expect(model.chatRequests().length).toBe(chats);
    expect(c.timeline.labels()).not.toContain('stt');
    await leaveAndCheck(c);
  }, 30_000);
});

/** Points the raw server at `handler` and returns its URL. */
function serve(handler: RawHandler): string {
  rawModel.handler = handler;
  return rawModel.url;
}

function hang(): string {
  return serve(raw.hang());
}
