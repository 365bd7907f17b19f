// Faults on the bridge path: the bridge going away during an escalation tool call, the agent runtime killed
// mid-turn (on /api/message, /api/message/stream and a spoken turn through the agent path), and the runtime
// known down. Real voice server, virtual robot, real bridge with the embedded agent as a child process; each
// turn ends within its deadline with the fallback and a clear reason in the log, the runtime comes back, and
// nothing is left behind (handles, sessions, open requests).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_FALLBACK_REPLY } from '../../src/bridge/message-rules.js';
import { type Bridge, startBridge } from '../../src/bridge/server.js';
import { parseConfig } from '../../src/config/index.js';
import type { VirtualRobot } from '../../src/device/robot.js';
import { AgentLlm } from '../../src/providers/llm/agent.js';
import { DEAD_AGENT, EMBEDDED_AGENT } from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { type FaultVoice, startFaultVoice } from '../support/fault-voice.js';
import {
  backToBaseline,
  baseline,
  LogCapture,
  RawServer,
  raw,
  requestOnce,
  TcpProxy,
} from '../support/faults.js';
import { freePort } from '../support/net.js';
import { connectRobot, eventually } from '../support/voice.js';

/** The agent's turn deadline (agent.turn_timeout) in this suite; every fallback must come well before it. */
const TURN_DEADLINE_MS = 20_000;
/** The voice server's think_hard deadline (bridge.timeout_long). */
const LONG_TOOL_MS = 3000;
const MARGIN_MS = 6000;

const voiceLogs = new LogCapture();
const bridgeLogs = new LogCapture();
let inner: FakeOpenAi;
let agentModel: FakeOpenAi;
let router: RawServer;
let proxy: TcpProxy;
let t: FaultVoice;
let bridge: Bridge;
let bridgeUrl: string;
const dirs: string[] = [];
const extraBridges: Bridge[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'deskbot-faults-bridge-'));
  dirs.push(dir);
  return dir;
}

async function bridgeOn(port: number, agentCommand: readonly string[], turnTimeoutSec: number) {
  const dataDir = tempDir();
  return startBridge(
    parseConfig({
      data_dir: dataDir,
      server: { bind_host: '127.0.0.1' },
      bridge: { port, voice_url: t.httpUrl, thinker_timeout: 30 },
      local_router: { url: router.url },
      agent: { turn_timeout: turnTimeoutSec },
    }),
    bridgeLogs.logger,
    {
      agentCommand: [...agentCommand],
      agentEnv: { LOG_LEVEL: 'silent', AGENT_MODEL_URL: agentModel.url, DATA_DIR: dataDir },
    },
  );
}

const openResponses = (fake: FakeOpenAi) => (fake as unknown as { open: Set<unknown> }).open.size;
/** The stand-ins for remote services (see liveHandles). */
const remotes = () => [inner.url, agentModel.url, router.url];
const healthy = async () =>
  (await requestOnce(`${bridgeUrl}/health`).catch(() => ({ status: 0 }))).status === 200;

beforeAll(async () => {
  inner = await new FakeOpenAi().start();
  agentModel = await new FakeOpenAi().start();
  router = await new RawServer().start();
  router.handler = raw.hang();
  const port = await freePort();
  bridgeUrl = `http://127.0.0.1:${port}`;
  proxy = await new TcpProxy({ host: '127.0.0.1', port }).start();
  t = await startFaultVoice(
    {
      voice_provider: 'twotier',
      bridge: { url: proxy.url, timeout_short: 2, timeout_long: LONG_TOOL_MS / 1000 },
      LLM: { TwoTier: { url: inner.url, api_key: 'k', model: 'small', timeout: 2 } },
    },
    voiceLogs.logger,
  );
  bridge = await bridgeOn(port, EMBEDDED_AGENT, TURN_DEADLINE_MS / 1000);
  await eventually(healthy, 30_000);
  // A first robot boots and leaves, so the keep-alive connections of its boot are in every baseline.
  const { robot } = await connectRobot(t);
  robot.dropConnection();
  robot.firmware.stop();
  await eventually(() => t.voice.registry.size === 0);
}, 60_000);

afterAll(async () => {
  await Promise.all([bridge?.close(), ...extraBridges.map((b) => b.close())]);
  await t?.close();
  await proxy?.close();
  await Promise.all([inner?.close(), agentModel?.close(), router?.close()]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let current: VirtualRobot | undefined;
afterEach(async () => {
  current?.dropConnection();
  current?.firmware.stop();
  current = undefined;
  proxy.refuse = false;
  t.llm.current = t.configured.llm;
});

const isStop = (f: { type: string; state?: string }) => f.type === 'tts' && f.state === 'stop';

/** Connections through the proxy are the voice server's keep-alive pool to the bridge, not leaks (and fetch
 *  opens a spare one after an aborted request): refuse new ones and cut the rest, then the counts must be
 *  back where they were. */
async function robotLeaves(robot: VirtualRobot, before: ReturnType<typeof baseline>): Promise<void> {
  robot.dropConnection();
  robot.firmware.stop();
  await eventually(() => t.voice.registry.size === 0);
  proxy.refuse = true;
  proxy.cut();
  await backToBaseline(before);
  proxy.refuse = false;
}

describe('the bridge goes away during an escalation tool call', () => {
  it('mid-call: the model hears "(think_hard unavailable)" and answers; the bridge drops its router call', async () => {
    const before = baseline(remotes());
    const { robot, timeline } = await connectRobot(t);
    current = robot;
    const conversation = t.voice.conversationOf(t.voice.registry.get(robot.deviceId)!)!;
    const voiceMark = voiceLogs.mark;
    const bridgeMark = bridgeLogs.mark;
    inner.script(
      { toolCalls: [{ name: 'think_hard', arguments: { question: 'why is the sky blue' } }] },
      { text: '😐 I could not work that out right now.' },
    );
    const started = performance.now();
    const stop = robot.waitFor(isStop, LONG_TOOL_MS + MARGIN_MS);
    robot.listen('detect', 'auto', 'why is the sky blue');
    await eventually(() => router.openResponses === 1, 5000); // the bridge is asking the local router
    proxy.refuse = true; // down from now on: the cut call and any retry
    proxy.cut();
    await stop;
    expect(performance.now() - started).toBeLessThan(LONG_TOOL_MS + MARGIN_MS);

    const toolMessage = inner.chatRequests().at(-1)!.body.messages.at(-1);
    expect(toolMessage).toMatchObject({ role: 'tool', content: '(think_hard unavailable)' });
    expect(timeline.labels()).toContain('sentence:I could not work that out right now.');
    expect(timeline.labels().at(-1)).toBe('tts:stop');
    const reason = voiceLogs.find('escalation failed', undefined, voiceMark);
    expect(reason, JSON.stringify(voiceLogs.entries.slice(voiceMark))).toHaveLength(1);
    expect(reason[0]).toMatchObject({ tool: 'think_hard', timedOut: false });
    // The bridge noticed its caller went away and stopped asking the router (thinker_timeout is 30 s).
    await eventually(() => router.openResponses === 0, 3000);
    expect(bridgeLogs.find('escalation cancelled: the caller went away', undefined, bridgeMark)).toHaveLength(
      1,
    );

    proxy.refuse = false;
    await eventually(() => Object.values(conversation.debugCounts()).every((n) => n === 0));
    await robotLeaves(robot, before);
  }, 30_000);

  it('down before the call: "(memory_lookup unavailable)" at once, and the turn finishes', async () => {
    const before = baseline(remotes());
    const { robot, timeline } = await connectRobot(t);
    current = robot;
    proxy.refuse = true;
    inner.script(
      { toolCalls: [{ name: 'memory_lookup', arguments: { query: 'tea' } }] },
      { text: '😐 I cannot remember right now.' },
    );
    const started = performance.now();
    const stop = robot.waitFor(isStop, MARGIN_MS);
    robot.listen('detect', 'auto', 'what tea do I like');
    await stop;
    expect(performance.now() - started).toBeLessThan(MARGIN_MS);
    expect(inner.chatRequests().at(-1)!.body.messages.at(-1)).toMatchObject({
      role: 'tool',
      content: '(memory_lookup unavailable)',
    });
    expect(timeline.labels()).toContain('sentence:I cannot remember right now.');
    proxy.refuse = false;
    await robotLeaves(robot, before);
  }, 30_000);
});

/** Reads a whole reply of either message route as the text the caller gets. */
async function message(path: string, sessionId: string): Promise<{ text: string; lines: unknown[] }> {
  const { status, text: body } = await requestOnce(`${bridgeUrl}${path}`, {
    method: 'POST',
    json: { content: 'hello there', channel: 'deskbot', session_id: sessionId },
    timeoutMs: TURN_DEADLINE_MS + MARGIN_MS,
  });
  expect(status, body).toBe(200);
  if (path === '/api/message')
    return { text: (JSON.parse(body) as { response: string }).response, lines: [] };
  const lines = body
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { type: string; content?: string });
  return { text: lines.at(-1)?.content ?? '', lines };
}

/** Kills the agent child once its model call is in flight (mid-turn); returns the kill time. */
async function killAgentMidTurn(): Promise<{ pid: number; at: number }> {
  await eventually(() => openResponses(agentModel) === 1, 10_000);
  const pid = bridge.agent().pid!;
  expect(pid).toBeGreaterThan(0);
  process.kill(pid, 'SIGKILL');
  return { pid, at: performance.now() };
}

describe('the agent runtime killed mid-turn', () => {
  it.each(['/api/message', '/api/message/stream'])(
    '%s: the fallback at once, the reason logged; the runtime respawns and the next turn works',
    async (path) => {
      const before = baseline(remotes());
      const mark = bridgeLogs.mark;
      agentModel.script({ text: '😊 This is never sent.', stallAfterChunks: 0 });
      const pending = message(path, `kill${path}`);
      const killed = await killAgentMidTurn();
      const reply = await pending;
      expect(performance.now() - killed.at).toBeLessThan(MARGIN_MS); // not the 20 s turn deadline
      expect(reply.text).toBe(AGENT_FALLBACK_REPLY);
      if (path.endsWith('stream')) {
        expect(reply.lines).toEqual([
          { type: 'chunk', content: AGENT_FALLBACK_REPLY },
          { type: 'final', content: AGENT_FALLBACK_REPLY },
        ]);
      }
      const reason = bridgeLogs.find(/agent turn failed|streamed reply failed/, /went away/, mark);
      expect(reason, JSON.stringify(bridgeLogs.entries.slice(mark))).toHaveLength(1);
      expect(bridgeLogs.find('agent runtime down', undefined, mark)).toHaveLength(1);
      expect(bridge.agent().activeSessions).toBe(0); // the sessions died with the child
      await eventually(() => openResponses(agentModel) === 0, 3000);

      await eventually(healthy, 30_000);
      expect(bridge.agent().pid).not.toBe(killed.pid);
      agentModel.script({ text: '😊 I am back.' });
      expect((await message(path, `kill${path}`)).text).toBe('😊 I am back.');
      expect(bridge.agent().activeSessions).toBe(1);
      await backToBaseline(before);
    },
    60_000,
  );

  it('a spoken turn through the agent path: the robot says the fallback, and the turn ends', async () => {
    const before = baseline(remotes());
    const { robot, timeline } = await connectRobot(t);
    current = robot;
    t.llm.current = new AgentLlm({
      url: `${proxy.url}/api/message/stream`,
      channel: 'deskbot',
      timeoutSec: TURN_DEADLINE_MS / 1000,
    });
    agentModel.script({ text: '😊 This is never sent.', stallAfterChunks: 0 });
    const stop = robot.waitFor(isStop, TURN_DEADLINE_MS);
    robot.listen('detect', 'auto', 'hello robot');
    const killed = await killAgentMidTurn();
    await stop;
    expect(performance.now() - killed.at).toBeLessThan(MARGIN_MS);
    const spoken = timeline
      .labels()
      .filter((label) => label.startsWith('sentence:'))
      .map((label) => label.slice('sentence:'.length));
    expect(spoken.join(' ')).toBe(AGENT_FALLBACK_REPLY.replace(/^😐 /, ''));
    expect(timeline.labels()).toContain('llm:neutral');
    await eventually(healthy, 30_000);
    await robotLeaves(robot, before);
  }, 60_000);
});

describe('the caller goes away mid-turn', () => {
  it('/api/message cancels its agent turn (session/cancel) and the agent drops its model call', async () => {
    const before = baseline(remotes());
    const mark = bridgeLogs.mark;
    agentModel.script({ text: '😊 This is never sent.', stallAfterChunks: 0 });
    // The client gives up after a second of silence: the turn is still waiting on the model.
    const gaveUp = requestOnce(`${bridgeUrl}/api/message`, {
      method: 'POST',
      json: { content: 'hello there', channel: 'deskbot', session_id: 'impatient' },
      timeoutMs: 1000,
    }).catch((error: Error) => error);
    await eventually(() => openResponses(agentModel) === 1, 10_000);
    expect(await gaveUp).toBeInstanceOf(Error);
    // Not held until the 20 s turn deadline: the bridge cancels, the agent stops asking its model.
    await eventually(
      () => bridgeLogs.find('turn cancelled; session/cancel sent', undefined, mark).length,
      3000,
    );
    await eventually(() => openResponses(agentModel) === 0, 3000);
    agentModel.script({ text: '😊 Still here.' });
    expect((await message('/api/message', 'impatient')).text).toBe('😊 Still here.');
    await backToBaseline(before);
  }, 30_000);
});

describe('the agent runtime known down', () => {
  it('both message routes answer the fallback at once, not after the 90 s turn deadline', async () => {
    const port = await freePort();
    const before = baseline(remotes());
    const mark = bridgeLogs.mark;
    const down = await bridgeOn(port, DEAD_AGENT, 90);
    extraBridges.push(down);
    const url = `http://127.0.0.1:${port}`;
    for (const path of ['/api/message', '/api/message/stream', '/api/message']) {
      const started = performance.now();
      const { text: body } = await requestOnce(`${url}${path}`, {
        method: 'POST',
        json: { content: 'anyone home?', channel: 'deskbot' },
        timeoutMs: 30_000,
      });
      expect(performance.now() - started, `${path} took too long`).toBeLessThan(MARGIN_MS);
      expect(body).toContain(AGENT_FALLBACK_REPLY);
    }
    const reasons = bridgeLogs.find(/agent turn failed|streamed reply failed/, /agent runtime is down/, mark);
    expect(reasons.length, JSON.stringify(bridgeLogs.entries.slice(mark))).toBe(3);
    expect(String(reasons[0]!.err)).toMatch(/agent runtime is down \(.+\)/);
    await down.close();
    extraBridges.splice(extraBridges.indexOf(down), 1);
    await backToBaseline(before);
  }, 30_000);
});
