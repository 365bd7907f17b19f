// The bridge's ACP client against a scripted ACP agent running as a real child process (test/support/fake-acp-agent.ts).
// Every agent-side fact is read back from the agent's own JSONL log of what it received.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AcpClient, type AcpClientError, type AcpClientOptions } from '../../src/bridge/acp-client.js';
import { silentLogger } from '../../src/util/log.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const FAKE = join(ROOT, 'test', 'support', 'fake-acp-agent.ts');
const COMMAND = [process.execPath, '--import', 'tsx', FAKE];

interface LogLine {
  ts: number;
  pid: number;
  kind: 'request' | 'notification' | 'response' | 'event';
  method?: string;
  id?: number;
  params?: any;
  result?: any;
  error?: any;
  ask?: string;
  sessionId?: string;
  stopReason?: string;
}

const clients: AcpClient[] = [];
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function setup(env: Record<string, string> = {}, overrides: Partial<AcpClientOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'acp-client-'));
  dirs.push(dir);
  const logPath = join(dir, 'agent.jsonl');
  const client = new AcpClient({
    command: COMMAND,
    cwd: ROOT,
    env: { FAKE_ACP_LOG: logPath, ...env },
    logger: silentLogger,
    turnTimeoutMs: 8000,
    rotation: { idleMs: 60_000, maxTurns: 100, maxAgeMs: 600_000 },
    respawn: { baseMs: 100, maxMs: 2000 },
    ...overrides,
  });
  clients.push(client);
  const log = (): LogLine[] =>
    existsSync(logPath)
      ? readFileSync(logPath, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as LogLine)
      : [];
  const requests = (method: string) =>
    log().filter((line) => line.kind === 'request' && line.method === method);
  const notifications = (method: string) =>
    log().filter((line) => line.kind === 'notification' && line.method === method);
  const events = (method: string) => log().filter((line) => line.kind === 'event' && line.method === method);
  return { client, log, requests, notifications, events };
}

/** "echo:<sessionId>:<text>" replies tell which session served a turn. */
function servedBy(text: string): string {
  const match = /^echo:([^:]+):/.exec(text);
  if (!match) throw new Error(`not an echo reply: ${text}`);
  return match[1]!;
}

async function rejection(promise: Promise<unknown>): Promise<AcpClientError> {
  try {
    await promise;
  } catch (error) {
    return error as AcpClientError;
  }
  throw new Error('expected the promise to reject');
}

async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

describe('AcpClient: handshake and sessions', () => {
  it('answers initialize before anything else and opens sessions with the absolute cwd and no MCP servers', async () => {
    const { client, log, requests } = setup({ FAKE_ACP_SLOW_INIT_MS: '400' });
    const started = client.start();
    const reply = client.prompt('c1', 'hello'); // issued while initialize is still unanswered
    await started;
    await reply;
    const lines = log().filter((line) => line.kind === 'request');
    expect(lines[0]!.method).toBe('initialize');
    expect(lines[0]!.params.protocolVersion).toBe(1);
    expect(lines[0]!.params.clientCapabilities).toEqual({
      fs: { readTextFile: false, writeTextFile: false },
      terminal: false,
    });
    const [init] = requests('initialize');
    const [created] = requests('session/new');
    // session/new went out only after the slow initialize was answered.
    expect(created!.ts - init!.ts).toBeGreaterThanOrEqual(350);
    expect(created!.params.cwd).toBe(ROOT);
    expect(isAbsolute(created!.params.cwd)).toBe(true);
    expect(created!.params.mcpServers).toEqual([]);
    expect(requests('initialize')).toHaveLength(1);
  });

  it('refuses a relative cwd', () => {
    expect(
      () =>
        new AcpClient({
          command: COMMAND,
          cwd: 'data/workspace',
          logger: silentLogger,
          turnTimeoutMs: 1000,
          rotation: { idleMs: 1, maxTurns: 1, maxAgeMs: 1 },
        }),
    ).toThrow(/absolute/);
  });

  it('streams agent_message_chunk text to onChunk in order and joins it into the result', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.';
    const { client } = setup({ FAKE_ACP_REPLY: text, FAKE_ACP_CHUNKS: '5', FAKE_ACP_CHUNK_DELAY_MS: '20' });
    await client.start();
    const chunks: string[] = [];
    const result = await client.prompt('c1', 'hi', { onChunk: (chunk) => chunks.push(chunk) });
    expect(chunks.length).toBe(5);
    expect(chunks.join('')).toBe(text);
    expect(result).toEqual({ text, stopReason: 'end_turn' });
  });

  it('delivers every chunk of a long, rapid stream, turn after turn', async () => {
    const text = 'x'.repeat(400);
    const { client } = setup({ FAKE_ACP_REPLY: text, FAKE_ACP_CHUNKS: '200' });
    await client.start();
    for (let i = 0; i < 3; i++) {
      let count = 0;
      const result = await client.prompt('c1', 'go', { onChunk: () => count++ });
      expect(count).toBe(200);
      expect(result.text).toBe(text);
    }
  });

  it('reuses the session of a conversation and gives another conversation its own', async () => {
    const { client, requests } = setup({ FAKE_ACP_REPLY: 'echo' });
    await client.start();
    const a1 = servedBy((await client.prompt('a', 'one')).text);
    const a2 = servedBy((await client.prompt('a', 'two')).text);
    const b1 = servedBy((await client.prompt('b', 'three')).text);
    expect(a2).toBe(a1);
    expect(b1).not.toBe(a1);
    expect(requests('session/new')).toHaveLength(2);
    expect(client.stats.sessions).toBe(2);
    expect(client.activeSessions).toBe(2);
  });

  it('rotates a session after maxTurns turns and closes the old one on the agent', async () => {
    const { client, requests } = setup(
      { FAKE_ACP_REPLY: 'echo' },
      { rotation: { idleMs: 60_000, maxTurns: 2, maxAgeMs: 600_000 } },
    );
    await client.start();
    const ids: string[] = [];
    for (const word of ['one', 'two', 'three', 'four', 'five'])
      ids.push(servedBy((await client.prompt('a', word)).text));
    expect(ids[1]).toBe(ids[0]);
    expect(ids[2]).not.toBe(ids[0]);
    expect(ids[3]).toBe(ids[2]);
    expect(ids[4]).not.toBe(ids[2]);
    expect(client.stats.rotations).toBe(2);
    await waitFor(() => requests('session/close').length === 2, 2000, 'session/close');
    expect(requests('session/close').map((line) => line.params.sessionId)).toEqual([ids[0], ids[2]]);
    expect(client.activeSessions).toBe(1);
  });

  it('rotates a session that was idle longer than idleMs', async () => {
    const { client } = setup(
      { FAKE_ACP_REPLY: 'echo' },
      { rotation: { idleMs: 300, maxTurns: 100, maxAgeMs: 600_000 } },
    );
    await client.start();
    const first = servedBy((await client.prompt('a', 'one')).text);
    const quick = servedBy((await client.prompt('a', 'two')).text);
    await sleep(600);
    const later = servedBy((await client.prompt('a', 'three')).text);
    expect(quick).toBe(first);
    expect(later).not.toBe(first);
    expect(client.stats.rotations).toBe(1);
  });

  it('rotates a session older than maxAgeMs even while it is kept busy', async () => {
    const { client } = setup(
      { FAKE_ACP_REPLY: 'echo' },
      { rotation: { idleMs: 60_000, maxTurns: 1000, maxAgeMs: 500 } },
    );
    await client.start();
    const firstAt = Date.now();
    const first = servedBy((await client.prompt('a', 'start')).text);
    let turnsOnFirst = 1;
    let next = first;
    while (next === first && Date.now() - firstAt < 5000) {
      await sleep(60);
      next = servedBy((await client.prompt('a', 'again')).text);
      if (next === first) turnsOnFirst++;
    }
    expect(next).not.toBe(first);
    expect(turnsOnFirst).toBeGreaterThanOrEqual(2); // never idle: it was age that rotated it
    expect(Date.now() - firstAt).toBeGreaterThanOrEqual(500);
    expect(client.stats.rotations).toBe(1);
  });

  it('keeps at most maxSessions sessions, evicting the least recently used', async () => {
    const { client, requests } = setup({ FAKE_ACP_REPLY: 'echo' }, { limits: { maxSessions: 2 } });
    await client.start();
    const a = servedBy((await client.prompt('a', '1')).text);
    const b = servedBy((await client.prompt('b', '2')).text);
    expect(servedBy((await client.prompt('a', '3')).text)).toBe(a); // a is now the most recent
    await client.prompt('c', '4'); // evicts b
    expect(client.activeSessions).toBe(2);
    expect(servedBy((await client.prompt('a', '5')).text)).toBe(a);
    expect(servedBy((await client.prompt('b', '6')).text)).not.toBe(b);
    expect(requests('session/new')).toHaveLength(4);
    await waitFor(
      () => requests('session/close').some((line) => line.params.sessionId === b),
      2000,
      'close of b',
    );
  });
});

describe('AcpClient: concurrency, deadlines and cancellation', () => {
  it('serialises turns of one conversation while different conversations overlap', async () => {
    const { client, requests, events } = setup({ FAKE_ACP_REPLY: 'echo', FAKE_ACP_CHUNKS: '4' });
    await client.start();
    const order: string[] = [];
    const turn = (conversation: string, text: string) =>
      client
        .prompt(conversation, text, { onChunk: () => order.push(`${text}:chunk`) })
        .then(() => order.push(`${text}:done`));
    await Promise.all([
      turn('a', 'sleep:80 first'),
      turn('a', 'sleep:80 second'),
      turn('b', 'sleep:80 other'),
    ]);
    const promptOf = (text: string) =>
      requests('session/prompt').find((line) => line.params.prompt[0].text === text)!;
    const first = promptOf('sleep:80 first');
    const second = promptOf('sleep:80 second');
    const other = promptOf('sleep:80 other');
    const firstEnd = events('prompt_end').find((line) => line.sessionId === first.params.sessionId)!;
    // The agent received the second turn of "a" only after it finished the first...
    expect(second.ts).toBeGreaterThanOrEqual(firstEnd.ts);
    expect(order.indexOf('sleep:80 second:chunk')).toBeGreaterThan(order.indexOf('sleep:80 first:done'));
    // ...while "b" ran at the same time as the first turn of "a".
    expect(other.ts).toBeLessThan(firstEnd.ts);
    expect(order.indexOf('sleep:80 other:chunk')).toBeLessThan(order.indexOf('sleep:80 first:done'));
  });

  it("rejects with 'busy' beyond the per-conversation queue cap", async () => {
    const { client } = setup({ FAKE_ACP_CHUNKS: '3' }, { limits: { maxQueuedPerConversation: 1 } });
    await client.start();
    const running = client.prompt('a', 'sleep:150 one');
    const queued = client.prompt('a', 'sleep:150 two');
    const t0 = Date.now();
    const error = await rejection(client.prompt('a', 'three'));
    expect(error.code).toBe('busy');
    expect(Date.now() - t0).toBeLessThan(200);
    await expect(running).resolves.toMatchObject({ stopReason: 'end_turn' });
    await expect(queued).resolves.toMatchObject({ stopReason: 'end_turn' });
    await expect(client.prompt('b', 'other conversation')).resolves.toMatchObject({ stopReason: 'end_turn' });
  });

  it("sends session/cancel at the deadline and rejects with 'timeout'; the session stays usable", async () => {
    const { client, requests, notifications, events } = setup(
      { FAKE_ACP_REPLY: 'echo', FAKE_ACP_CHUNKS: '20' },
      { turnTimeoutMs: 600 },
    );
    await client.start();
    const chunks: string[] = [];
    const t0 = Date.now();
    const error = await rejection(
      client.prompt('a', 'sleep:200 slow', { onChunk: (chunk) => chunks.push(chunk) }),
    );
    const elapsed = Date.now() - t0;
    expect(error.code).toBe('timeout');
    expect(elapsed).toBeGreaterThanOrEqual(550);
    expect(elapsed).toBeLessThan(1500);
    const [prompted] = requests('session/prompt');
    await waitFor(() => notifications('session/cancel').length === 1, 2000, 'session/cancel');
    expect(notifications('session/cancel')[0]!.params).toEqual({ sessionId: prompted!.params.sessionId });
    expect(client.stats.cancels).toBe(1);
    const seen = chunks.length;
    // The agent honoured the cancel, so the next turn reuses the session; late chunks never reach the old caller.
    const next = await client.prompt('a', 'quick');
    expect(servedBy(next.text)).toBe(prompted!.params.sessionId);
    expect(events('prompt_end')[0]).toMatchObject({
      sessionId: prompted!.params.sessionId,
      stopReason: 'cancelled',
    });
    expect(chunks.length).toBe(seen);
  });

  it('drops a session whose agent ignores session/cancel, so the next turn gets a fresh one', async () => {
    const { client, requests } = setup(
      { FAKE_ACP_REPLY: 'echo', FAKE_ACP_CHUNKS: '10', FAKE_ACP_IGNORE_CANCEL: '1' },
      { turnTimeoutMs: 500, limits: { cancelGraceMs: 300 } },
    );
    await client.start();
    const error = await rejection(client.prompt('a', 'sleep:200 slow'));
    expect(error.code).toBe('timeout');
    const [stuck] = requests('session/prompt');
    const next = await client.prompt('a', 'quick');
    expect(servedBy(next.text)).not.toBe(stuck!.params.sessionId);
    expect(requests('session/close').map((line) => line.params.sessionId)).toContain(stuck!.params.sessionId);
  });

  it("cancels the same way with 'aborted' when the caller's signal fires", async () => {
    const { client, requests, notifications } = setup({ FAKE_ACP_CHUNKS: '20' });
    await client.start();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const t0 = Date.now();
    const error = await rejection(client.prompt('a', 'sleep:200 slow', { signal: controller.signal }));
    expect(error.code).toBe('aborted');
    expect(Date.now() - t0).toBeLessThan(1200);
    await waitFor(() => notifications('session/cancel').length === 1, 2000, 'session/cancel');
    expect(notifications('session/cancel')[0]!.params.sessionId).toBe(
      requests('session/prompt')[0]!.params.sessionId,
    );
    expect(client.stats.cancels).toBe(1);
  });

  it('does not send anything for an already aborted signal', async () => {
    const { client, requests } = setup();
    await client.start();
    const error = await rejection(client.prompt('a', 'hi', { signal: AbortSignal.abort() }));
    expect(error.code).toBe('aborted');
    await sleep(100);
    expect(requests('session/prompt')).toHaveLength(0);
    expect(requests('session/new')).toHaveLength(0);
  });

  it("answers the agent's permission, fs and terminal requests with refusals instead of hanging", async () => {
    const { client, events } = setup(
      { FAKE_ACP_ASK: 'permission,fs_read,fs_write,terminal' },
      { turnTimeoutMs: 4000 },
    );
    await client.start();
    await expect(client.prompt('a', 'do risky things')).resolves.toMatchObject({ stopReason: 'end_turn' });
    const answers = Object.fromEntries(events('client_answer').map((line) => [line.ask, line]));
    expect(answers.permission!.result).toEqual({ outcome: { outcome: 'selected', optionId: 'no' } });
    for (const ask of ['fs_read', 'fs_write', 'terminal']) expect(answers[ask]!.error.code).toBe(-32601);
    expect(existsSync('/tmp/fake-acp-should-not-exist')).toBe(false);
  });
});

describe('AcpClient: crashes, session loss, health and close', () => {
  it("rejects a turn whose agent crashes with 'agent_crashed', respawns after a backoff, and works again", async () => {
    const { client, requests } = setup(
      { FAKE_ACP_REPLY: 'echo', FAKE_ACP_CRASH_ON_PROMPT: '2' },
      { respawn: { baseMs: 800, maxMs: 5000 } },
    );
    await client.start();
    const before = servedBy((await client.prompt('a', 'one')).text);
    const error = await rejection(client.prompt('a', 'two'));
    expect(error.code).toBe('agent_crashed');
    expect(client.stats.crashes).toBe(1);
    expect(client.activeSessions).toBe(0);
    await sleep(400);
    expect(client.stats.spawns).toBe(1); // still backing off: no tight respawn loop
    expect(await client.health()).toBe(false);
    const after = await client.prompt('a', 'three'); // waits for the respawn
    expect(client.stats.spawns).toBe(2);
    expect(servedBy(after.text)).not.toBe(before);
    const pids = requests('initialize').map((line) => line.pid);
    expect(pids).toHaveLength(2);
    expect(pids[1]).not.toBe(pids[0]);
    expect(alive(pids[0]!)).toBe(false);
  });

  it('backs off exponentially when the agent keeps dying at startup', async () => {
    const { client } = setup(
      {},
      { command: [process.execPath, '-e', 'process.exit(1)'], respawn: { baseMs: 100, maxMs: 10_000 } },
    );
    const error = await rejection(client.start());
    expect(error.code).toBe('init_failed');
    await sleep(1500);
    // 100, 200, 400, 800 ms between attempts: about 4 spawns in 1.5 s, not hundreds.
    expect(client.stats.spawns).toBeGreaterThanOrEqual(3);
    expect(client.stats.spawns).toBeLessThanOrEqual(6);
    // Sampled while the agent keeps dying: the newest child may have spawned and not died yet.
    expect(client.stats.crashes).toBeGreaterThanOrEqual(client.stats.spawns - 1);
    expect(client.stats.crashes).toBeLessThanOrEqual(client.stats.spawns);
  });

  it("start() rejects with 'init_failed' when the agent command does not exist, and keeps retrying", async () => {
    const { client } = setup(
      {},
      { command: ['/nonexistent/agent-runtime'], respawn: { baseMs: 100, maxMs: 10_000 } },
    );
    const error = await rejection(client.start());
    expect(error.code).toBe('init_failed');
    expect(await client.health()).toBe(false);
    await waitFor(() => client.stats.spawns >= 2, 2000, 'a retry');
  });

  it('resets the backoff once the child stayed up for resetAfterMs', async () => {
    const { client, requests } = setup({}, { respawn: { baseMs: 400, maxMs: 10_000, resetAfterMs: 200 } });
    await client.start();
    const delays: number[] = [];
    for (let round = 0; round < 3; round++) {
      await waitFor(() => client.health(), 5000, 'agent up');
      await sleep(300); // up longer than resetAfterMs
      const pid = requests('initialize').at(-1)!.pid;
      const spawns = client.stats.spawns;
      const killedAt = Date.now();
      process.kill(pid, 'SIGKILL');
      await waitFor(() => client.stats.spawns > spawns, 5000, 'respawn');
      delays.push(Date.now() - killedAt);
    }
    // Without the reset the third delay would be 1600 ms.
    for (const delay of delays) {
      expect(delay).toBeGreaterThanOrEqual(350);
      expect(delay).toBeLessThan(1000);
    }
  });

  it('retries once on a new session when the agent no longer knows the session', async () => {
    const { client, requests } = setup({ FAKE_ACP_REPLY: 'echo', FAKE_ACP_FORGET_SESSIONS_AFTER: '2' });
    await client.start();
    const first = servedBy((await client.prompt('a', 'one')).text);
    const second = await client.prompt('a', 'two');
    expect(servedBy(second.text)).not.toBe(first);
    expect(second.text).toMatch(/:two$/);
    expect(requests('session/prompt').map((line) => line.params.sessionId)).toEqual([
      first,
      first,
      servedBy(second.text),
    ]);
    expect(requests('session/new')).toHaveLength(2);
    expect(client.stats.rotations).toBe(0);
  });

  it("gives up with 'session_not_found' when the fresh session is refused too", async () => {
    const { client, requests } = setup({ FAKE_ACP_ALWAYS_FORGET: '1' });
    await client.start();
    const error = await rejection(client.prompt('a', 'one'));
    expect(error.code).toBe('session_not_found');
    expect(requests('session/prompt')).toHaveLength(2);
    expect(requests('session/new')).toHaveLength(2);
  });

  it('health() is true while up, false while the child is down, true again after the respawn', async () => {
    const { client, requests } = setup({}, { respawn: { baseMs: 500, maxMs: 5000 } });
    expect(await client.health()).toBe(false); // not started
    await client.start();
    expect(await client.health()).toBe(true);
    expect(requests('_deskbot/ping').length).toBeGreaterThanOrEqual(1); // a real round trip
    const pid = requests('initialize')[0]!.pid;
    process.kill(pid, 'SIGKILL');
    await waitFor(async () => !(await client.health(500)), 2000, 'health false');
    // A prompt that arrives while the agent is down waits for the respawn.
    await expect(client.prompt('a', 'are you back?')).resolves.toMatchObject({ stopReason: 'end_turn' });
    expect(await client.health()).toBe(true);
    expect(client.stats.spawns).toBe(2);
    expect(client.stats.crashes).toBe(1);
  });

  it('close() kills the child, rejects in-flight turns and never respawns', async () => {
    const { client, requests } = setup({ FAKE_ACP_CHUNKS: '20' });
    await client.start();
    const pid = requests('initialize')[0]!.pid;
    expect(alive(pid)).toBe(true);
    const inflight = rejection(client.prompt('a', 'sleep:200 long'));
    await waitFor(() => requests('session/prompt').length === 1, 3000, 'prompt sent');
    await client.close();
    expect((await inflight).code).toBe('closed');
    expect(alive(pid)).toBe(false);
    await sleep(400);
    expect(client.stats.spawns).toBe(1);
    expect(client.stats.crashes).toBe(0);
    expect(await client.health()).toBe(false);
    expect((await rejection(client.prompt('a', 'again'))).code).toBe('closed');
  });

  it('close() also ends an agent that ignores SIGTERM and stdin EOF', async () => {
    const { client, requests } = setup({ FAKE_ACP_STUBBORN: '1' });
    await client.start();
    const pid = requests('initialize')[0]!.pid;
    await client.close();
    expect(alive(pid)).toBe(false);
  });

  it("start() rejects with 'init_failed' when initialize is not answered in time", async () => {
    const { client } = setup({ FAKE_ACP_SLOW_INIT_MS: '5000' }, { initializeTimeoutMs: 300 });
    const t0 = Date.now();
    const error = await rejection(client.start());
    expect(error.code).toBe('init_failed');
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(await client.health()).toBe(false);
  });
});
