// The embedded ACP agent as a real child process (`node --import tsx src/agent/main.ts`), driven over its
// stdio by the SDK's client side, with the scripted OpenAI-compatible server as its model.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { APOLOGY } from '../../src/agent/agent.js';
import { MemoryStore } from '../../src/agent/memory.js';
import { PERSONA_FILES } from '../../src/agent/workspace.js';
import { FakeOpenAi } from '../support/fake-openai.js';

const ROOT = resolve(import.meta.dirname, '..', '..');

interface RunningAgent {
  child: ChildProcess;
  conn: acp.ClientConnection;
  /** session/update notifications in arrival order. */
  updates: acp.SessionNotification[];
  /** Every byte the agent wrote on stdout. */
  stdout: () => string;
  stderr: () => string;
  workspace: string;
}

let fake: FakeOpenAi;
let dataDir: string;
const running: RunningAgent[] = [];

beforeEach(async () => {
  fake = await new FakeOpenAi().start();
  dataDir = mkdtempSync(join(tmpdir(), 'deskbot-agent-'));
});

afterEach(async () => {
  for (const agent of running.splice(0)) {
    agent.conn.close();
    if (agent.child.exitCode === null && agent.child.signalCode === null) {
      const exited = new Promise((done) => agent.child.once('exit', done));
      agent.child.stdin?.end();
      const timer = setTimeout(() => agent.child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    }
  }
  await fake.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function startAgent(env: Record<string, string> = {}): RunningAgent {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/agent/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      AGENT_MODEL_URL: fake.url,
      AGENT_MODEL: 'fake',
      AGENT_API_KEY: 'agent-test-key',
      LOG_LEVEL: 'debug',
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (text: string) => {
    stderr += text;
  });
  let stdout = '';
  const decoder = new TextDecoder();
  const tap = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      stdout += decoder.decode(chunk, { stream: true });
      controller.enqueue(chunk);
    },
  });
  const input = (Readable.toWeb(child.stdout!) as unknown as ReadableStream<Uint8Array>).pipeThrough(tap);
  const output = Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>;
  const updates: acp.SessionNotification[] = [];
  const conn = acp
    .client({ name: 'agent-runtime-test' })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .connect(acp.ndJsonStream(output, input));
  const agent: RunningAgent = {
    child,
    conn,
    updates,
    stdout: () => stdout,
    stderr: () => stderr,
    workspace: join(dataDir, 'workspace'),
  };
  running.push(agent);
  return agent;
}

async function initialize(agent: RunningAgent): Promise<acp.InitializeResponse> {
  return agent.conn.agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: 'agent-runtime-test', version: '1.0.0' },
  });
}

async function newSession(agent: RunningAgent): Promise<string> {
  const { sessionId } = await agent.conn.agent.request(acp.methods.agent.session.new, {
    cwd: dataDir,
    mcpServers: [],
  });
  return sessionId;
}

function prompt(agent: RunningAgent, sessionId: string, text: string): Promise<acp.PromptResponse> {
  return agent.conn.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: 'text', text }],
  });
}

/** The text chunks of one session, in order, since update number `from`. */
function chunks(agent: RunningAgent, sessionId: string, from = 0): string[] {
  return agent.updates
    .slice(from)
    .filter((n) => n.sessionId === sessionId)
    .map((n) => n.update)
    .filter((u) => u.sessionUpdate === 'agent_message_chunk' && u.content.type === 'text')
    .map((u) => (u as { content: { text: string } }).content.text);
}

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 10));
  }
}

async function closedPort(): Promise<number> {
  return new Promise((done) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

function expectSessionNotFound(error: unknown, sessionId: string): void {
  expect(error).toBeInstanceOf(acp.RequestError);
  expect(error).toMatchObject({ code: -32002, message: 'Resource not found', data: { sessionId } });
}

describe('embedded ACP agent over stdio', () => {
  it('initializes, seeds the workspace, and streams the scripted reply as ordered message chunks', async () => {
    const reply = '😊 Hello there! I am your desk robot, and I am happy to see you.';
    fake.script({ text: reply, chunkChars: 5 });
    const agent = startAgent();

    const init = await initialize(agent);
    expect(init.protocolVersion).toBe(acp.PROTOCOL_VERSION);
    expect(init.agentCapabilities?.loadSession).toBe(false);
    expect(init.agentInfo?.name).toBe('deskbot-agent');

    const files = await readdir(agent.workspace);
    for (const name of PERSONA_FILES) expect(files).toContain(name);
    for (const name of PERSONA_FILES) {
      expect((await readFile(join(agent.workspace, name), 'utf8')).trim().length).toBeGreaterThan(0);
    }

    const sessionId = await newSession(agent);
    expect(sessionId).toMatch(/\S/);
    const result = await prompt(agent, sessionId, 'Hi robot!');
    expect(result.stopReason).toBe('end_turn');

    const pieces = chunks(agent, sessionId);
    expect(pieces.length).toBe(Math.ceil(Array.from(reply).length / 5));
    expect(pieces.join('')).toBe(reply);
    expect(agent.updates.every((n) => n.sessionId === sessionId)).toBe(true);

    const [request] = fake.chatRequests();
    expect(request!.body.model).toBe('fake');
    expect(request!.body.stream).toBe(true);
    expect(request!.headers.authorization).toBe('Bearer agent-test-key');
    expect(request!.body.messages.at(-1)).toEqual({ role: 'user', content: 'Hi robot!' });

    // stdout carried nothing but JSON-RPC, although the agent logged at debug level (to stderr).
    const lines = agent.stdout().split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(pieces.length);
    for (const line of lines) expect(JSON.parse(line).jsonrpc).toBe('2.0');
    await until(() => agent.stderr().includes('"msg":"turn complete"'), 'the turn log line on stderr');
  });

  it('puts the persona files and remembered facts into the system message, read on every turn', async () => {
    const workspace = join(dataDir, 'workspace');
    await mkdir(workspace, { recursive: true });
    const soul = '# Soul\n\nYou are Zed-7, a tiny robot who folds origami cranes.\n';
    await writeFile(join(workspace, 'SOUL.md'), soul);
    await writeFile(join(workspace, 'USER.md'), 'Maya is eight and loves dinosaurs.\n');
    const memory = await MemoryStore.open(workspace);
    await memory.remember('Maya is allergic to peanuts');
    fake.script({ text: '😊 Noted.' }, { text: '😊 Noted again.' });
    const agent = startAgent();
    await initialize(agent);

    expect(await readFile(join(workspace, 'SOUL.md'), 'utf8')).toBe(soul); // never overwritten
    const sessionId = await newSession(agent);
    expect((await prompt(agent, sessionId, 'What do you know about Maya?')).stopReason).toBe('end_turn');

    const [first] = fake.chatRequests();
    const system = first!.body.messages[0];
    expect(system.role).toBe('system');
    expect(system.content).toContain('You are Zed-7, a tiny robot who folds origami cranes.');
    expect(system.content).toContain('Maya is eight and loves dinosaurs.');
    expect(system.content).toContain('Maya is allergic to peanuts');
    expect(system.content).toContain('You are a desk robot with a screen for a face'); // the seeded IDENTITY.md default
    expect(system.content).toMatch(/Today is \w+day, \d{4}-\d{2}-\d{2}\./);

    // A fact the bridge writes while the agent runs is in the very next turn.
    await memory.remember('Maya got a new bicycle');
    await prompt(agent, sessionId, 'Anything new?');
    expect(fake.chatRequests()[1]!.body.messages[0].content).toContain('Maya got a new bicycle');
  });

  it('sends earlier turns of the same session as history, and keeps sessions apart', async () => {
    fake.script(
      { text: '😊 Nice to meet you, Ada.' },
      { text: '😊 Your name is Ada.' },
      { text: '🤔 No idea.' },
    );
    const agent = startAgent();
    await initialize(agent);
    const sessionId = await newSession(agent);
    await prompt(agent, sessionId, 'My name is Ada.');
    expect((await prompt(agent, sessionId, 'What is my name?')).stopReason).toBe('end_turn');

    const second = fake.chatRequests()[1]!.body.messages;
    expect(second.slice(1)).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: '😊 Nice to meet you, Ada.' },
      { role: 'user', content: 'What is my name?' },
    ]);

    const other = await newSession(agent);
    expect(other).not.toBe(sessionId);
    await prompt(agent, other, 'What is my name?');
    const third = fake.chatRequests()[2]!.body.messages;
    expect(third.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
  });

  it('session/cancel during a slow stream ends the prompt with stopReason cancelled', async () => {
    const slow = '😊 Once upon a time there was a very slow robot who told very long stories.';
    const totalPieces = Math.ceil(Array.from(slow).length / 2);
    fake.script({ text: slow, chunkChars: 2, chunkDelayMs: 150 }, { text: '😊 Okay, next.' });
    const agent = startAgent();
    await initialize(agent);
    const sessionId = await newSession(agent);

    const started = Date.now();
    const pending = prompt(agent, sessionId, 'Tell me a long story.');
    await until(() => chunks(agent, sessionId).length >= 2, 'the first chunks');
    await agent.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId });
    const result = await pending;
    const elapsedMs = Date.now() - started;

    expect(result.stopReason).toBe('cancelled');
    const streamMs = totalPieces * 150;
    expect(elapsedMs).toBeLessThan(streamMs); // it did not wait for the rest of the stream
    const received = chunks(agent, sessionId).length;
    expect(received).toBeLessThan(totalPieces);
    await new Promise((done) => setTimeout(done, 400));
    expect(chunks(agent, sessionId).length).toBe(received); // nothing more after the answer

    // The session goes on, and the cancelled turn is not part of its history.
    const next = await prompt(agent, sessionId, 'Never mind.');
    expect(next.stopReason).toBe('end_turn');
    const messages = fake.chatRequests()[1]!.body.messages;
    expect(messages.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
    expect(messages[1].content).toBe('Never mind.');
  });

  it('fails a prompt for an unknown session with the ACP session-not-found error', async () => {
    const agent = startAgent();
    await initialize(agent);
    const error = await prompt(agent, 'no-such-session', 'hello?').catch((e: unknown) => e);
    expectSessionNotFound(error, 'no-such-session');
    expect(fake.chatRequests()).toHaveLength(0);
    // A known session still works afterwards.
    const sessionId = await newSession(agent);
    expect((await prompt(agent, sessionId, 'hello?')).stopReason).toBe('end_turn');
  });

  it('rejects a relative cwd, does not offer session/load, and forgets closed sessions', async () => {
    const agent = startAgent();
    await initialize(agent);
    const relative = await agent.conn.agent
      .request(acp.methods.agent.session.new, { cwd: 'relative/dir', mcpServers: [] })
      .catch((e: unknown) => e);
    expect(relative).toMatchObject({ code: -32602 });
    const load = await agent.conn.agent
      .request(acp.methods.agent.session.load, { sessionId: 'x', cwd: dataDir, mcpServers: [] })
      .catch((e: unknown) => e);
    expect(load).toMatchObject({ code: -32601 });

    const sessionId = await newSession(agent);
    await agent.conn.agent.request(acp.methods.agent.session.close, { sessionId });
    expectSessionNotFound(await prompt(agent, sessionId, 'still there?').catch((e: unknown) => e), sessionId);
  });

  it('apologises instead of crashing when the model endpoint is down, and stays up', async () => {
    const agent = startAgent({ AGENT_MODEL_URL: `http://127.0.0.1:${await closedPort()}/v1` });
    await initialize(agent);
    const sessionId = await newSession(agent);

    const result = await prompt(agent, sessionId, 'Are you there?');
    expect(result.stopReason).toBe('end_turn');
    expect(chunks(agent, sessionId)).toEqual([APOLOGY]);
    await until(() => agent.stderr().includes('model call failed'), 'the failure log line on stderr');

    expect(agent.child.exitCode).toBeNull();
    const again = await prompt(agent, sessionId, 'Hello?');
    expect(again.stopReason).toBe('end_turn');
    expect(chunks(agent, sessionId)).toEqual([APOLOGY, APOLOGY]);
    expect(await newSession(agent)).toMatch(/\S/);
    expect(agent.child.exitCode).toBeNull();
  });

  it('apologises on a model HTTP error, then answers normally on the next turn', async () => {
    fake.script({ status: 500 }, { text: '😊 I am back.' });
    const agent = startAgent();
    await initialize(agent);
    const sessionId = await newSession(agent);
    expect((await prompt(agent, sessionId, 'one')).stopReason).toBe('end_turn');
    expect(chunks(agent, sessionId)).toEqual([APOLOGY]);
    const before = agent.updates.length;
    expect((await prompt(agent, sessionId, 'two')).stopReason).toBe('end_turn');
    expect(chunks(agent, sessionId, before).join('')).toBe('😊 I am back.');
    // The failed turn left no trace in the history.
    expect(fake.chatRequests()[1]!.body.messages.slice(1)).toEqual([{ role: 'user', content: 'two' }]);
  });

  it('exits cleanly when the client closes stdin', async () => {
    const agent = startAgent();
    await initialize(agent);
    const exited = new Promise<number | null>((done) => agent.child.once('exit', (code) => done(code)));
    agent.child.stdin!.end();
    expect(await exited).toBe(0);
  });
});
