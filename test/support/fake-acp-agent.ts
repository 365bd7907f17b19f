// A scripted ACP agent for tests: the SDK's agent side over this process's stdin/stdout; logs only to stderr.
// Run: node --import tsx test/support/fake-acp-agent.ts
//
// Behaviour (env):
//   FAKE_ACP_LOG=path               append one JSON line per received message (and per scripted event) to path:
//                                   {ts, pid, kind: 'request'|'notification'|'response'|'event', method, id?, params?,
//                                    result?, error?}; responses name the agent's own request they answer.
//   FAKE_ACP_REPLY=text             the reply, streamed as agent_message_chunk updates; 'echo' replies
//                                   "echo:<sessionId>:<prompt text>". Default "Hello from the fake agent."
//   FAKE_ACP_CHUNKS=n               pieces the reply is streamed in (default 3)
//   FAKE_ACP_CHUNK_DELAY_MS=ms      pause before each piece after the first (default 0)
//                                   (a prompt whose text starts with "sleep:<ms>" uses <ms> instead, for that turn)
//   FAKE_ACP_IGNORE_CANCEL=1        keep streaming after session/cancel (otherwise stop with stopReason 'cancelled')
//   FAKE_ACP_CRASH_ON_PROMPT=n      process.exit(3) right after the first chunk of the n-th prompt; n counts the
//                                   session/prompt lines in FAKE_ACP_LOG (all processes sharing it), else per process
//   FAKE_ACP_FORGET_SESSIONS_AFTER=n  on this process's n-th prompt, forget every session created so far (as an agent
//                                   that restarted would) and answer -32002 session-not-found for them
//   FAKE_ACP_ALWAYS_FORGET=1        forget all sessions at every prompt (every prompt is session-not-found)
//   FAKE_ACP_SLOW_INIT_MS=ms        delay the initialize answer
//   FAKE_ACP_ASK=a,b                during each prompt, call the client: permission, fs_read, fs_write, terminal;
//                                   each answer is logged as an event 'client_answer' {ask, result|error}
//   FAKE_ACP_NO_CLOSE=1             do not advertise/implement session/close
//   FAKE_ACP_STUBBORN=1             ignore SIGTERM and stdin EOF (only SIGKILL stops it)
import { appendFileSync, readFileSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';

const env = process.env;
const LOG = env.FAKE_ACP_LOG ?? '';
const REPLY = env.FAKE_ACP_REPLY ?? 'Hello from the fake agent.';
const CHUNKS = Math.max(1, Number(env.FAKE_ACP_CHUNKS ?? 3));
const CHUNK_DELAY_MS = Number(env.FAKE_ACP_CHUNK_DELAY_MS ?? 0);
const IGNORE_CANCEL = env.FAKE_ACP_IGNORE_CANCEL === '1';
const CRASH_ON_PROMPT = Number(env.FAKE_ACP_CRASH_ON_PROMPT ?? 0);
const FORGET_AFTER = Number(env.FAKE_ACP_FORGET_SESSIONS_AFTER ?? 0);
const ALWAYS_FORGET = env.FAKE_ACP_ALWAYS_FORGET === '1';
const SLOW_INIT_MS = Number(env.FAKE_ACP_SLOW_INIT_MS ?? 0);
const ASK = (env.FAKE_ACP_ASK ?? '').split(',').filter(Boolean);
const SESSION_CLOSE = env.FAKE_ACP_NO_CLOSE !== '1';
const STUBBORN = env.FAKE_ACP_STUBBORN === '1';

const sessions = new Set<string>();
const cancelled = new Set<string>();
const outgoing = new Map<string | number, string>();
let sessionCounter = 0;
let promptsHere = 0;

function record(line: Record<string, unknown>): void {
  if (!LOG) return;
  appendFileSync(LOG, `${JSON.stringify({ ts: Date.now(), pid: process.pid, ...line })}\n`);
}

function promptsInLog(): number {
  if (!LOG) return promptsHere;
  let count = 0;
  for (const line of readFileSync(LOG, 'utf8').split('\n')) {
    if (line.includes('"session/prompt"') && line.includes('"kind":"request"')) count++;
  }
  return count;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function pieces(text: string, count: number): string[] {
  const size = Math.max(1, Math.ceil(text.length / count));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length > 0 ? out : [''];
}

async function ask(client: acp.AgentContext, what: string, sessionId: string): Promise<void> {
  try {
    let result: unknown;
    if (what === 'permission') {
      result = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: { toolCallId: 'call-1', title: 'delete everything' },
        options: [
          { optionId: 'yes', name: 'Allow', kind: 'allow_once' },
          { optionId: 'no', name: 'Reject', kind: 'reject_once' },
        ],
      });
    } else if (what === 'fs_read') {
      result = await client.request(acp.methods.client.fs.readTextFile, { sessionId, path: '/etc/hostname' });
    } else if (what === 'fs_write') {
      result = await client.request(acp.methods.client.fs.writeTextFile, {
        sessionId,
        path: '/tmp/fake-acp-should-not-exist',
        content: 'x',
      });
    } else if (what === 'terminal') {
      result = await client.request(acp.methods.client.terminal.create, { sessionId, command: 'true' });
    }
    record({ kind: 'event', method: 'client_answer', ask: what, result });
  } catch (error) {
    const e = error as { code?: number; message?: string };
    record({
      kind: 'event',
      method: 'client_answer',
      ask: what,
      error: { code: e.code, message: e.message },
    });
  }
}

const app = acp
  .agent({ name: 'fake-acp-agent' })
  .onRequest(acp.methods.agent.initialize, async () => {
    if (SLOW_INIT_MS > 0) await sleep(SLOW_INIT_MS);
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: false, sessionCapabilities: SESSION_CLOSE ? { close: {} } : {} },
      agentInfo: { name: 'fake-acp-agent', version: '0.0.0' },
    };
  })
  .onRequest(acp.methods.agent.session.new, () => {
    const sessionId = `s${process.pid}-${++sessionCounter}`;
    sessions.add(sessionId);
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    promptsHere++;
    const globalCount = promptsInLog();
    const { sessionId } = params;
    if (ALWAYS_FORGET || (FORGET_AFTER > 0 && promptsHere === FORGET_AFTER)) sessions.clear();
    if (!sessions.has(sessionId)) throw acp.RequestError.sessionNotFound(sessionId);
    cancelled.delete(sessionId);
    for (const what of ASK) await ask(client, what, sessionId);
    const text = params.prompt.map((block) => (block.type === 'text' ? block.text : '')).join('');
    const reply = REPLY === 'echo' ? `echo:${sessionId}:${text}` : REPLY;
    const parts = pieces(reply, CHUNKS);
    const delay = Number(/^sleep:(\d+)/.exec(text)?.[1] ?? CHUNK_DELAY_MS);
    for (let i = 0; i < parts.length; i++) {
      if (i > 0 && delay > 0) await sleep(delay);
      if (cancelled.has(sessionId) && !IGNORE_CANCEL) {
        record({ kind: 'event', method: 'prompt_end', sessionId, stopReason: 'cancelled' });
        return { stopReason: 'cancelled' };
      }
      await client.notify(acp.methods.client.session.update, {
        sessionId,
        update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: parts[i]! } },
      });
      if (i === 0 && CRASH_ON_PROMPT > 0 && globalCount === CRASH_ON_PROMPT) {
        process.stderr.write(`fake-acp-agent: crashing on prompt ${globalCount}\n`);
        process.exit(3);
      }
    }
    record({ kind: 'event', method: 'prompt_end', sessionId, stopReason: 'end_turn' });
    return { stopReason: 'end_turn' };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    cancelled.add(params.sessionId);
  });

if (SESSION_CLOSE) {
  app.onRequest(acp.methods.agent.session.close, ({ params }) => {
    sessions.delete(params.sessionId);
    return {};
  });
}

// Log every message on its way in (before the SDK dispatches it) and remember our own requests' methods.
const wire = acp.ndJsonStream(
  Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
  Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
);
const tap = new TransformStream<acp.AnyMessage, acp.AnyMessage>({
  transform(message, controller) {
    const m = message as Record<string, unknown>;
    if (typeof m.method === 'string') {
      record({ kind: 'id' in m ? 'request' : 'notification', method: m.method, id: m.id, params: m.params });
    } else if ('id' in m) {
      const id = m.id as string | number;
      record({ kind: 'response', method: outgoing.get(id), id, result: m.result, error: m.error });
      outgoing.delete(id);
    }
    controller.enqueue(message);
  },
});
const out = new TransformStream<acp.AnyMessage, acp.AnyMessage>({
  transform(message, controller) {
    const m = message as Record<string, unknown>;
    if (typeof m.method === 'string' && 'id' in m) outgoing.set(m.id as string | number, m.method);
    controller.enqueue(message);
  },
});
void out.readable.pipeTo(wire.writable).catch(() => {});
const connection = app.connect({ readable: wire.readable.pipeThrough(tap), writable: out.writable });

if (STUBBORN) {
  process.on('SIGTERM', () => process.stderr.write('fake-acp-agent: ignoring SIGTERM\n'));
  setInterval(() => {}, 1 << 30); // outlive stdin EOF too
} else {
  void connection.closed.then(() => process.exit(0));
}
process.stderr.write(`fake-acp-agent: up (pid ${process.pid})\n`);
