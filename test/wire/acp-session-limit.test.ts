// The ACP client's session limit under load, against the scripted ACP agent as a real child process: a
// conversation with a turn running is never evicted, a new conversation over the limit is refused with 'busy'
// at once, and when it is admitted later the idle victim's session/close reaches the agent before its
// session/new (so the agent, which keeps its own limit, never has to drop a session on its own).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { AcpClient, AcpClientError } from '../../src/bridge/acp-client.js';
import { silentLogger } from '../../src/util/log.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const FAKE = join(ROOT, 'test', 'support', 'fake-acp-agent.ts');

let client: AcpClient | undefined;
let dir: string | undefined;

afterEach(async () => {
  await client?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('keeps busy sessions, refuses a new conversation over the limit, then admits it by closing an idle one', async () => {
  dir = mkdtempSync(join(tmpdir(), 'acp-limit-'));
  const logPath = join(dir, 'agent.jsonl');
  client = new AcpClient({
    command: [process.execPath, '--import', 'tsx', FAKE],
    cwd: ROOT,
    env: { FAKE_ACP_LOG: logPath, FAKE_ACP_REPLY: 'echo', FAKE_ACP_CHUNKS: '4' },
    logger: silentLogger,
    turnTimeoutMs: 8000,
    rotation: { idleMs: 60_000, maxTurns: 100, maxAgeMs: 600_000 },
    limits: { maxSessions: 2 },
  });
  // The agent's log, in the order it received things.
  const received = (): Array<{ kind: string; method?: string; params?: any }> =>
    existsSync(logPath)
      ? readFileSync(logPath, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line))
      : [];
  const requests = (method: string) => received().filter((l) => l.kind === 'request' && l.method === method);
  await client.start();

  const a = client.prompt('a', 'sleep:300 first of a');
  const b = client.prompt('b', 'sleep:300 b');
  await new Promise((done) => setTimeout(done, 100)); // both turns are running on the agent
  const queuedOnA = client.prompt('a', 'second of a'); // not a new conversation: it queues

  const refusedAt = Date.now();
  const refusal = await client.prompt('c', 'c').then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(refusal).toBeInstanceOf(AcpClientError);
  expect((refusal as AcpClientError).code).toBe('busy');
  expect(Date.now() - refusedAt).toBeLessThan(100);

  // The running turns end on their own sessions, with their whole text, and nothing was closed under them.
  const [ra, rb, ra2] = await Promise.all([a, b, queuedOnA]);
  const sessionOf = (text: string) => /^echo:([^:]+):/.exec(text)?.[1];
  expect(ra.text).toMatch(/^echo:[^:]+:sleep:300 first of a$/);
  expect(rb.text).toMatch(/^echo:[^:]+:sleep:300 b$/);
  expect(sessionOf(ra2.text)).toBe(sessionOf(ra.text));
  expect(requests('session/close')).toEqual([]);

  // Now c fits: b is the least recently used idle conversation, and its close comes before c's session/new.
  const rc = await client.prompt('c', 'c again');
  expect(rc.text).toMatch(/:c again$/);
  const log = received();
  const closeAt = log.findIndex((l) => l.method === 'session/close');
  const newForC = log.findLastIndex((l) => l.kind === 'request' && l.method === 'session/new');
  expect(log[closeAt]?.params.sessionId).toBe(sessionOf(rb.text));
  expect(closeAt).toBeLessThan(newForC);
  expect(requests('session/new')).toHaveLength(3);
  expect(client.activeSessions).toBe(2);
});
