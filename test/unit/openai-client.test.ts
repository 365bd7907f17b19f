// The OpenAI-compatible client against the scripted fake server (test/support/fake-openai.ts): streamed
// text, tool-call assembly, headers, and every deadline and failure mapped to a ProviderError code.
// Deadlines are kept small so the whole file runs in a few seconds.
import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type ChatChunk,
  type Deadlines,
  type Endpoint,
  joinUrl,
  ProviderError,
  request,
  streamChat,
} from '../../src/providers/openai-client.js';
import { FakeOpenAi } from '../support/fake-openai.js';

const DEADLINES: Deadlines = { responseMs: 500, idleMs: 300, totalMs: 3_000 };
const BODY = { model: 'fake-model', messages: [{ role: 'user' as const, content: 'hi' }] };

let fake: FakeOpenAi;
let endpoint: Endpoint;

beforeEach(async () => {
  fake = await new FakeOpenAi().start();
  endpoint = { url: fake.url, apiKey: 'sk-test-123' };
});

afterEach(async () => {
  await fake.close();
});

async function collect(stream: AsyncIterable<ChatChunk>): Promise<ChatChunk[]> {
  const chunks: ChatChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/** Runs the stream to its end and returns the error it ended with (fails the test if there is none). */
async function failure(
  stream: AsyncIterable<ChatChunk>,
): Promise<{ error: ProviderError; chunks: ChatChunk[]; ms: number }> {
  const started = performance.now();
  const chunks: ChatChunk[] = [];
  try {
    for await (const chunk of stream) chunks.push(chunk);
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return { error: error as ProviderError, chunks, ms: performance.now() - started };
  }
  throw new Error(`expected the stream to fail, it ended normally after ${chunks.length} chunks`);
}

async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/v1`;
}

const texts = (chunks: ChatChunk[]) => chunks.flatMap((c) => (c.type === 'text' ? [c.text] : []));

describe('streamChat: success', () => {
  it('yields the text deltas in order; they join to the scripted text', async () => {
    const text = '😊 Sure thing, my friend. It is sunny today! Anything else?';
    fake.script({ text, chunkChars: 3 });
    const chunks = await collect(streamChat(endpoint, BODY, DEADLINES));
    const parts = texts(chunks);
    expect(parts.length).toBe(Math.ceil(Array.from(text).length / 3));
    expect(parts[0]).toBe('😊 S');
    expect(parts.join('')).toBe(text);
    expect(chunks.every((c) => c.type === 'text')).toBe(true);
  });

  it('delivers deltas as they arrive, not at the end', async () => {
    fake.script({ text: 'one two three four', chunkChars: 4, chunkDelayMs: 80 });
    const arrivals: number[] = [];
    const started = performance.now();
    for await (const chunk of streamChat(endpoint, BODY, DEADLINES)) {
      if (chunk.type === 'text') arrivals.push(performance.now() - started);
    }
    expect(arrivals.length).toBe(5);
    expect(arrivals[arrivals.length - 1]! - arrivals[0]!).toBeGreaterThan(200);
  });

  it('sends Authorization: Bearer <key>, JSON content type, stream: true and the request body', async () => {
    fake.script({ text: 'ok' });
    await collect(streamChat(endpoint, { ...BODY, max_tokens: 256, temperature: 0.7 }, DEADLINES));
    const [req] = fake.chatRequests();
    expect(req!.path).toBe('/v1/chat/completions');
    expect(req!.headers.authorization).toBe('Bearer sk-test-123');
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.body).toEqual({ ...BODY, max_tokens: 256, temperature: 0.7, stream: true });
  });

  it('sends no Authorization header when there is no key', async () => {
    fake.script({ text: 'ok' });
    await collect(streamChat({ url: fake.url }, BODY, DEADLINES));
    expect(fake.chatRequests()[0]!.headers.authorization).toBeUndefined();
  });

  it('a base URL with a trailing slash works the same', async () => {
    fake.script({ text: 'ok' });
    expect(texts(await collect(streamChat({ url: `${fake.url}/` }, BODY, DEADLINES)))).toEqual(['ok']);
    expect(fake.chatRequests()[0]!.path).toBe('/v1/chat/completions');
  });

  it('assembles tool calls split across chunks and yields them once, at the end', async () => {
    fake.script({
      text: 'Let me check.',
      toolCalls: [
        { name: 'memory_lookup', arguments: { query: 'favourite colour', limit: 3 } },
        { name: 'think_hard', arguments: { question: 'why is the sky blue?', nested: { a: [1, 2] } } },
      ],
    });
    const chunks = await collect(streamChat(endpoint, BODY, DEADLINES));
    const toolChunks = chunks.filter((c) => c.type === 'tool_calls');
    expect(toolChunks).toHaveLength(1);
    expect(chunks[chunks.length - 1]).toBe(toolChunks[0]);
    expect(texts(chunks).join('')).toBe('Let me check.');
    const calls = (toolChunks[0] as Extract<ChatChunk, { type: 'tool_calls' }>).calls;
    expect(calls.map((c) => ({ id: c.id, type: c.type, name: c.function.name }))).toEqual([
      { id: 'call_0', type: 'function', name: 'memory_lookup' },
      { id: 'call_1', type: 'function', name: 'think_hard' },
    ]);
    expect(JSON.parse(calls[0]!.function.arguments)).toEqual({ query: 'favourite colour', limit: 3 });
    expect(JSON.parse(calls[1]!.function.arguments)).toEqual({
      question: 'why is the sky blue?',
      nested: { a: [1, 2] },
    });
  });

  it('a reply with only a tool call yields no text', async () => {
    fake.script({ toolCalls: [{ name: 'play_song', arguments: { name: 'happy birthday' } }] });
    const chunks = await collect(streamChat(endpoint, BODY, DEADLINES));
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({ type: 'tool_calls', calls: [{ function: { name: 'play_song' } }] });
  });

  it('an empty reply yields nothing', async () => {
    fake.script({ text: '' });
    expect(await collect(streamChat(endpoint, BODY, DEADLINES))).toEqual([]);
  });
});

describe('streamChat: failures', () => {
  it.each([401, 403, 429, 500, 503])('HTTP %i → ProviderError http with that status', async (status) => {
    fake.script({ status });
    const { error } = await failure(streamChat(endpoint, BODY, DEADLINES));
    expect(error.code).toBe('http');
    expect(error.status).toBe(status);
    expect(error.message).toContain(String(status));
  });

  it('connection refused (closed port) → unreachable', async () => {
    const { error } = await failure(streamChat({ url: await closedPortUrl() }, BODY, DEADLINES));
    expect(error.code).toBe('unreachable');
    expect(error.status).toBeUndefined();
  });

  it('response headers later than responseMs → timeout, at about responseMs', async () => {
    fake.script({ text: 'too late', delayMs: 1_000 });
    const { error, ms } = await failure(streamChat(endpoint, BODY, { ...DEADLINES, responseMs: 150 }));
    expect(error.code).toBe('timeout');
    expect(ms).toBeGreaterThanOrEqual(140);
    expect(ms).toBeLessThan(800);
  });

  it('headers just within responseMs are fine', async () => {
    fake.script({ text: 'in time', delayMs: 50 });
    expect(texts(await collect(streamChat(endpoint, BODY, { ...DEADLINES, responseMs: 400 })))).toEqual([
      'in t',
      'ime',
    ]);
  });

  it('a stream that stalls → stalled within about idleMs, after the chunks that did arrive', async () => {
    fake.script({ text: 'this stream will stop half way', chunkChars: 5, stallAfterChunks: 2 });
    const { error, chunks, ms } = await failure(streamChat(endpoint, BODY, { ...DEADLINES, idleMs: 200 }));
    expect(error.code).toBe('stalled');
    expect(texts(chunks)).toEqual(['this ', 'strea']);
    expect(ms).toBeGreaterThanOrEqual(190);
    expect(ms).toBeLessThan(900);
  });

  it('slow but steady chunks (each under idleMs) are not a stall', async () => {
    fake.script({ text: 'slow and steady', chunkChars: 5, chunkDelayMs: 100 });
    const chunks = await collect(streamChat(endpoint, BODY, { ...DEADLINES, idleMs: 300 }));
    expect(texts(chunks).join('')).toBe('slow and steady');
  });

  it('a whole stream longer than totalMs → timeout', async () => {
    fake.script({ text: 'a'.repeat(40), chunkChars: 2, chunkDelayMs: 50 }); // ≈ 1 s
    const { error, ms } = await failure(
      streamChat(endpoint, BODY, { ...DEADLINES, idleMs: 300, totalMs: 300 }),
    );
    expect(error.code).toBe('timeout');
    expect(ms).toBeLessThan(900);
  });

  it('a malformed chunk → malformed, after the text that came before it', async () => {
    fake.script({ text: 'Hello', malformed: true });
    const { error, chunks } = await failure(streamChat(endpoint, BODY, DEADLINES));
    expect(error.code).toBe('malformed');
    expect(texts(chunks).join('')).toBe('Hello');
  });

  it('an AbortSignal aborted mid-stream ends the stream at once (no hang)', async () => {
    const text = 'word '.repeat(60);
    fake.script({ text, chunkChars: 5, chunkDelayMs: 40 }); // ≈ 2.4 s if read to the end
    const controller = new AbortController();
    const started = performance.now();
    const received: string[] = [];
    let error: unknown;
    try {
      for await (const chunk of streamChat(endpoint, BODY, DEADLINES, controller.signal)) {
        if (chunk.type === 'text') received.push(chunk.text);
        if (received.length === 2) controller.abort();
      }
    } catch (e) {
      error = e;
    }
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(received.length).toBeLessThanOrEqual(3);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).code).toBe('aborted');
  });

  it('an AbortSignal aborted while waiting for headers → aborted, without waiting for the server', async () => {
    fake.script({ text: 'slow', delayMs: 2_000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const { error, ms } = await failure(streamChat(endpoint, BODY, DEADLINES, controller.signal));
    expect(error.code).toBe('aborted');
    expect(ms).toBeLessThan(450);
  });

  it('an already aborted signal → aborted', async () => {
    fake.script({ text: 'never' });
    const { error } = await failure(streamChat(endpoint, BODY, DEADLINES, AbortSignal.abort()));
    expect(error.code).toBe('aborted');
  });
});

describe('request', () => {
  it('returns the response for the caller to read (non-streaming chat)', async () => {
    fake.script({ text: '😊 Hello.' });
    const { response, controller } = await request(
      endpoint,
      '/chat/completions',
      { body: JSON.stringify(BODY), headers: { 'Content-Type': 'application/json' } },
      DEADLINES,
    );
    const json = (await response.json()) as { choices: Array<{ message: { content: string } }> };
    controller.abort();
    expect(json.choices[0]!.message.content).toBe('😊 Hello.');
    const [req] = fake.chatRequests();
    expect(req!.headers.authorization).toBe('Bearer sk-test-123');
    expect(req!.body).toEqual(BODY);
  });

  it('caller headers are sent alongside the Authorization header', async () => {
    const { controller } = await request(
      endpoint,
      'models',
      { body: '', headers: { 'X-Extra': 'yes' } },
      DEADLINES,
    );
    controller.abort();
    const [req] = fake.requests;
    expect(req!.path).toBe('/v1/models');
    expect(req!.headers['x-extra']).toBe('yes');
    expect(req!.headers.authorization).toBe('Bearer sk-test-123');
  });

  it.each([401, 500])('HTTP %i → ProviderError http with status', async (status) => {
    fake.script({ status });
    const error = await request(endpoint, 'chat/completions', { body: '{}' }, DEADLINES).catch((e) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ code: 'http', status });
  });

  it('unknown path (404) → http 404', async () => {
    const error = await request(endpoint, 'nothing/here', { body: '{}' }, DEADLINES).catch((e) => e);
    expect(error).toMatchObject({ code: 'http', status: 404 });
  });

  it('connection refused → unreachable', async () => {
    const error = await request({ url: await closedPortUrl() }, 'x', { body: '' }, DEADLINES).catch((e) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error.code).toBe('unreachable');
  });

  it('headers later than responseMs → timeout', async () => {
    fake.script({ text: 'late', delayMs: 800 });
    const error = await request(
      endpoint,
      'chat/completions',
      { body: JSON.stringify(BODY), headers: { 'Content-Type': 'application/json' } },
      { responseMs: 100, totalMs: 3_000 },
    ).catch((e) => e);
    expect(error).toMatchObject({ code: 'timeout' });
  });
});

describe('joinUrl', () => {
  it.each([
    ['http://h/v1', 'chat/completions', 'http://h/v1/chat/completions'],
    ['http://h/v1/', 'chat/completions', 'http://h/v1/chat/completions'],
    ['http://h/v1//', '/chat/completions', 'http://h/v1/chat/completions'],
    ['http://h/v1', '/audio/speech', 'http://h/v1/audio/speech'],
  ])('%s + %s → %s', (base, path, expected) => {
    expect(joinUrl(base, path)).toBe(expected);
  });
});
