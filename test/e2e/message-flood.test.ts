// Conversations under load (issue 13 item 4): 300 conversations at once, each its own session id, against the
// real bridge driving the real embedded agent child, whose model is a scripted chat-completions server that
// answers after 200 ms. Three kinds of caller share the flood: POST /api/message, raw POST /api/message/stream
// and the AgentLLM voice provider (which reads the stream endpoint). Every tenth conversation's model answers
// with a bare emoji, which must come back as the fallback, never as "😐 ".
//
// Every caller must get its own real reply, a 503 busy with Retry-After in the error shape (the voice provider
// speaks its busy line), or for the mute ones the fallback: nothing empty, no turn lost to session_not_found,
// and never more conversations on the agent at once than its session limit.
//
// The listener's connection caps (64 per address, 256 in all; the bridge does not take them from config yet)
// come before the agent: the raw HTTP callers spread over five loopback source addresses so no address is over
// its cap, and a connection over the total cap must get the listener's own 503 too_many_connections.
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AGENT_FALLBACK_REPLY, isEmptyReply } from '../../src/bridge/message-rules.js';
import { type Bridge, startBridge } from '../../src/bridge/server.js';
import { parseConfig } from '../../src/config/index.js';
import { AGENT_BUSY_REPLY, AgentLlm } from '../../src/providers/llm/agent.js';
import { EMBEDDED_AGENT } from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { LogCapture } from '../support/faults.js';
import { eventually } from '../support/voice.js';

const CONVERSATIONS = 300;
const MODEL_DELAY_MS = 200;
/** The bridge's (and the embedded agent's) default session limit. */
const SESSION_LIMIT = 64;
const CHANNEL = 'flood';
/** Retry rounds a refused /api/message caller gets, each after the Retry-After it was given. */
const MAX_RETRY_ROUNDS = 10;

type Kind = 'answer' | 'busy' | 'fallback' | 'listener' | 'other';
interface Outcome {
  kind: Kind;
  detail: string;
  retryAfterSec?: number;
}

const logs = new LogCapture();
let model: FakeOpenAi;
let bridge: Bridge;
let url: string;
let dataDir: string;

const question = (id: number) => `question q${id} please`;
const isMute = (id: number) => id % 10 === 0;
const answer = (id: number) => `😊 Answer for q${id}.`;
/** What an admitted conversation must get: its own reply, or the fallback when its model said nothing. */
const expected = (id: number): Kind => (isMute(id) ? 'fallback' : 'answer');

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = (body) => {
    const id = Number(/q(\d+)/.exec(JSON.stringify(body.messages.at(-1)))?.[1]);
    return { delayMs: MODEL_DELAY_MS, text: isMute(id) ? '😐 ' : answer(id) };
  };
  dataDir = mkdtempSync(join(tmpdir(), 'deskbot-flood-'));
  bridge = await startBridge(
    parseConfig({
      data_dir: dataDir,
      server: { bind_host: '127.0.0.1' },
      bridge: { port: 0, voice_url: 'http://127.0.0.1:9' },
      // The whole flood comes from one address; the listener's connection caps (their own limit, tested
      // elsewhere) would refuse it first. Here the agent's session limit is what is under load.
      limits: { http_max_connections: 1024, http_max_connections_per_address: 1024 },
    }),
    logs.logger,
    { agentCommand: [...EMBEDDED_AGENT], agentEnv: { LOG_LEVEL: 'silent', AGENT_MODEL_URL: model.url } },
  );
  url = `http://127.0.0.1:${bridge.port}`;
  await eventually(() => bridge.agent().health(), 30_000);
}, 60_000);

afterAll(async () => {
  await bridge?.close();
  await model?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function classify(id: number, text: string): Outcome {
  if (text === answer(id)) return { kind: 'answer', detail: text };
  if (text === AGENT_FALLBACK_REPLY) return { kind: 'fallback', detail: text };
  return { kind: 'other', detail: JSON.stringify(text) };
}

/** A 503 must be `busy` in the error shape with a usable Retry-After (or the listener's connection cap). */
function refused(response: Posted): Outcome {
  const body = JSON.parse(response.text) as { error?: { code?: string; message?: string } };
  const retryAfterSec = Number(response.retryAfter);
  const ok = typeof body.error?.message === 'string' && retryAfterSec > 0;
  const kind = body.error?.code === 'busy' ? 'busy' : 'listener';
  const listenerOk = kind === 'listener' && body.error?.code === 'too_many_connections';
  return {
    kind: ok && (kind === 'busy' || listenerOk) ? kind : 'other',
    detail: response.text,
    retryAfterSec,
  };
}

interface Posted {
  status: number;
  retryAfter: string | undefined;
  text: string;
}

/** POST on a connection of its own from 127.0.0.(2..6), so each address stays under the listener's cap. */
function post(path: string, id: number): Promise<Posted> {
  const body = JSON.stringify({ content: question(id), channel: CHANNEL, session_id: `flood-${id}` });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}${path}`,
      {
        method: 'POST',
        agent: false,
        localAddress: `127.0.0.${2 + (id % 5)}`,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], text }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function viaMessage(id: number): Promise<Outcome> {
  const response = await post('/api/message', id);
  if (response.status === 503) return refused(response);
  if (response.status !== 200) return { kind: 'other', detail: `HTTP ${response.status}` };
  return classify(id, (JSON.parse(response.text) as { response: string }).response);
}

async function viaStream(id: number): Promise<Outcome> {
  const response = await post('/api/message/stream', id);
  if (response.status === 503) return refused(response);
  const lines = response.text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { type: string; content?: string });
  const chunks = lines.filter((line) => line.type === 'chunk');
  const final = lines.at(-1);
  if (
    response.status !== 200 ||
    final?.type !== 'final' ||
    chunks.some((c) => isEmptyReply(c.content ?? ''))
  ) {
    return { kind: 'other', detail: `HTTP ${response.status} ${JSON.stringify(lines)}` };
  }
  return classify(id, final.content ?? '');
}

async function viaVoiceProvider(id: number): Promise<Outcome> {
  const llm = new AgentLlm({ url: `${url}/api/message/stream`, channel: CHANNEL, timeoutSec: 30 });
  const spoken: string[] = [];
  try {
    for await (const text of llm.reply({
      sessionId: `flood-${id}`,
      deviceId: 'flood-device',
      history: [{ role: 'user', content: question(id) }],
      systemPrompt: '',
      kidMode: false,
      signal: new AbortController().signal,
      say: () => {},
    })) {
      spoken.push(text);
    }
  } catch (error) {
    return { kind: 'other', detail: `threw ${(error as Error).message}` };
  }
  const text = spoken.join(' ');
  return text === AGENT_BUSY_REPLY ? { kind: 'busy', detail: text } : classify(id, text);
}

/** The most model calls (i.e. agent turns) that were running at the same moment. */
function peakConcurrentTurns(): number {
  const edges = model
    .chatRequests()
    .flatMap((r) => [
      { at: r.at, step: 1 },
      { at: r.at + MODEL_DELAY_MS, step: -1 },
    ])
    .sort((a, b) => a.at - b.at || a.step - b.step);
  let running = 0;
  let peak = 0;
  for (const edge of edges) {
    running += edge.step;
    peak = Math.max(peak, running);
  }
  return peak;
}

it('300 conversations at once: each gets its own reply, a 503 busy, or the fallback for an empty reply', async () => {
  // 150 on /api/message, 100 on the stream, 50 through the voice provider (whose fetch comes from 127.0.0.1).
  const callers = [viaMessage, viaMessage, viaMessage, viaStream, viaStream, viaVoiceProvider];
  const started = Date.now();
  const outcomes = await Promise.all(
    Array.from({ length: CONVERSATIONS }, (_, id) => callers[id % callers.length]!(id)),
  );
  const floodMs = Date.now() - started;

  const bad = outcomes
    .map((outcome, id) => ({ id, ...outcome }))
    .filter(({ id, kind }) => kind !== 'busy' && kind !== 'listener' && kind !== expected(id));
  expect(bad).toEqual([]);
  const count = (kind: Kind) => outcomes.filter((o) => o.kind === kind).length;
  expect(count('busy')).toBeGreaterThan(0); // the flood really was over the limit...
  // ...and the refusal reached every kind of caller: the stream as a 503 too, the voice provider as its line.
  for (const caller of new Set(callers)) {
    expect(outcomes.some((o, id) => callers[id % callers.length] === caller && o.kind === 'busy')).toBe(true);
  }
  expect(count('answer') + count('fallback')).toBeGreaterThanOrEqual(SESSION_LIMIT); // ...and the limit was used
  expect(peakConcurrentTurns()).toBeLessThanOrEqual(SESSION_LIMIT);
  expect(bridge.agent().activeSessions).toBeLessThanOrEqual(SESSION_LIMIT);
  // No turn lost its session to eviction, and the cache never had to keep more busy sessions than its limit.
  const lostSession = logs.entries.filter(
    (e) =>
      e.code === 'session_not_found' || /lost the session|every conversation is busy/.test(String(e.msg)),
  );
  expect(lostSession).toEqual([]);

  // Busy is temporary: refused /api/message callers that honour Retry-After all get their reply.
  let waiting = outcomes
    .map((outcome, id) => ({ id, outcome }))
    .filter(({ id, outcome }) => outcome.kind === 'busy' && callers[id % callers.length] === viaMessage);
  const refusedOnMessage = waiting.length;
  let rounds = 0;
  while (waiting.length > 0 && rounds < MAX_RETRY_ROUNDS) {
    rounds++;
    const waitSec = Math.max(...waiting.map(({ outcome }) => outcome.retryAfterSec ?? 0));
    await new Promise((resolve) => setTimeout(resolve, waitSec * 1000));
    const retried = await Promise.all(waiting.map(async ({ id }) => ({ id, outcome: await viaMessage(id) })));
    for (const { id, outcome } of retried) {
      if (outcome.kind !== 'busy') expect(outcome).toMatchObject({ kind: expected(id) });
    }
    waiting = retried.filter(({ outcome }) => outcome.kind === 'busy');
  }
  expect(waiting).toEqual([]);

  console.log(
    `flood: ${CONVERSATIONS} conversations in ${floodMs} ms: ${count('answer')} answered, ` +
      `${count('fallback')} fallback (empty model reply), ${count('busy')} busy, ` +
      `${count('listener')} refused by the listener's connection cap; peak ${peakConcurrentTurns()} ` +
      `agent turns at once; ${refusedOnMessage} refused /api/message callers answered after ${rounds} retry rounds`,
  );
}, 60_000);
