// AgentLlm (legacy path) against the scripted bridge's POST /api/message/stream: NDJSON lines
// {type: chunk|final|error}, spoken as they arrive; every failure is a ProviderError within the deadline.
import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentLlm } from '../../src/providers/llm/agent.js';
import type { LlmTurn } from '../../src/providers/llm/types.js';
import { ProviderError } from '../../src/providers/openai-client.js';
import { FakeBridge } from '../support/fake-bridge.js';

const CHANNEL = 'deskbot';
let bridge: FakeBridge;

beforeEach(async () => {
  bridge = await new FakeBridge().start();
});

afterEach(async () => {
  await bridge.close();
});

function makeLlm(over: { url?: string; timeoutSec?: number } = {}): AgentLlm {
  return new AgentLlm({
    url: over.url ?? `${bridge.url}/api/message/stream`,
    channel: CHANNEL,
    timeoutSec: over.timeoutSec ?? 5,
  });
}

function makeTurn(over: Partial<LlmTurn> = {}): LlmTurn {
  return {
    sessionId: 'session-7',
    deviceId: 'aa:bb:cc:dd:ee:ff',
    history: [
      { role: 'system', content: 'system text' },
      { role: 'user', content: 'What is the weather?' },
      { role: 'assistant', content: '😊 It is sunny.' },
      { role: 'user', content: 'And tomorrow?' },
    ],
    systemPrompt: 'You are Pip.',
    kidMode: false,
    signal: new AbortController().signal,
    say: () => undefined,
    ...over,
  };
}

async function run(llm: AgentLlm, turn = makeTurn()) {
  const started = performance.now();
  const chunks: Array<{ text: string; at: number }> = [];
  for await (const text of llm.reply(turn)) chunks.push({ text, at: performance.now() });
  return { chunks, texts: chunks.map((c) => c.text), ms: performance.now() - started };
}

async function fails(llm: AgentLlm, turn = makeTurn()) {
  const started = performance.now();
  const texts: string[] = [];
  try {
    for await (const text of llm.reply(turn)) texts.push(text);
  } catch (error) {
    return { error, texts, ms: performance.now() - started };
  }
  throw new Error(`expected reply() to throw; it ended normally with ${JSON.stringify(texts)}`);
}

async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/api/message/stream`;
}

describe('AgentLlm request', () => {
  it('posts {content: the last user message, channel} to the stream endpoint', async () => {
    bridge.streams.push({ lines: [{ type: 'final', content: '😊 Tomorrow is rainy.' }] });
    await run(makeLlm());
    const posted = bridge.posted('/api/message/stream');
    expect(posted).toHaveLength(1);
    expect(posted[0]).toMatchObject({ content: 'And tomorrow?', channel: CHANNEL });
    expect(typeof posted[0].content).toBe('string');
  });
});

describe('AgentLlm streaming', () => {
  it('yields chunk lines as they arrive: the first before the last line is sent', async () => {
    const lineDelayMs = 400;
    bridge.streams.push({
      lines: [
        { type: 'chunk', content: '😊 Tomorrow is rainy.' },
        { type: 'chunk', content: ' Take an umbrella.' },
        { type: 'final', content: '😊 Tomorrow is rainy. Take an umbrella.' },
      ],
      lineDelayMs,
    });
    const { chunks } = await run(makeLlm());
    // The chunks are spoken; the final line repeats them and is not spoken again.
    expect(chunks.map((c) => c.text)).toEqual(['😊 Tomorrow is rainy.', ' Take an umbrella.']);
    const requestAt = bridge.requests.find((r) => r.path === '/api/message/stream')!.at;
    // The final line is written no earlier than requestAt + 2 × lineDelayMs.
    const lastLineSentAt = requestAt + 2 * lineDelayMs;
    expect(chunks[0]!.at).toBeLessThan(lastLineSentAt);
    expect(chunks[0]!.at - requestAt).toBeLessThan(lineDelayMs);
    expect(chunks[1]!.at - chunks[0]!.at).toBeGreaterThanOrEqual(lineDelayMs - 50);
  });

  it('a final line with no chunks before it is yielded', async () => {
    bridge.streams.push({ lines: [{ type: 'final', content: '😐 Only the final line.' }] });
    const { texts } = await run(makeLlm());
    expect(texts).toEqual(['😐 Only the final line.']);
  });
});

describe('AgentLlm failures', () => {
  it('an {type:"error"} line throws a ProviderError carrying the message', async () => {
    bridge.streams.push({ lines: [{ type: 'error', message: 'agent runtime is down' }] });
    const { error, ms } = await fails(makeLlm());
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).message).toContain('agent runtime is down');
    expect(ms).toBeLessThan(3_000);
  });

  it('an error line after a chunk throws after yielding the chunk', async () => {
    bridge.streams.push({
      lines: [
        { type: 'chunk', content: '😊 Let me see.' },
        { type: 'error', message: 'turn failed' },
      ],
    });
    const { error, texts } = await fails(makeLlm());
    expect(error).toBeInstanceOf(ProviderError);
    expect(texts).toEqual(['😊 Let me see.']);
  });

  it('a malformed line throws ProviderError malformed', async () => {
    bridge.streams.push({ lines: ['{"type": "chunk", "content": this is not json'] });
    const { error } = await fails(makeLlm());
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).code).toBe('malformed');
  });

  it('a stream that ends without any reply line throws ProviderError malformed', async () => {
    bridge.streams.push({ lines: [] });
    const { error } = await fails(makeLlm());
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).code).toBe('malformed');
  });

  it('HTTP 500 throws ProviderError http 500', async () => {
    bridge.streams.push({ lines: [], status: 500 });
    const { error, ms } = await fails(makeLlm());
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).code).toBe('http');
    expect((error as ProviderError).status).toBe(500);
    expect(ms).toBeLessThan(3_000);
  });

  it('a bridge that is not there → ProviderError unreachable', async () => {
    const { error, ms } = await fails(makeLlm({ url: await closedPortUrl() }));
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).code).toBe('unreachable');
    expect(ms).toBeLessThan(3_000);
  });

  it('timeoutSec bounds a stream that never ends: a ProviderError at about the deadline', async () => {
    bridge.streams.push({
      lines: [
        { type: 'chunk', content: '😊 Hello.' },
        { type: 'chunk', content: ' This never comes.' },
      ],
      lineDelayMs: 20_000,
    });
    const { error, texts, ms } = await fails(makeLlm({ timeoutSec: 1 }));
    expect(texts).toEqual(['😊 Hello.']);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).code).toBe('timeout');
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(4_000);
  });
});
