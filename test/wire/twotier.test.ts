// TwoTierLlm.reply() on the wire: a scripted OpenAI-compatible server (local, and a second one as the cloud)
// and a scripted bridge, both on loopback. One test per rule of SPEC "Two-tier provider behavior", the tool
// catalogue, the escalation record, the memory side channel, smart mode / hot swap, and DESIGN §3's
// escalation result texts. Deadlines are small so failures end fast; timing bounds are tolerant.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BridgeClient } from '../../src/providers/llm/bridge-client.js';
import { ProviderConfigError, TwoTierLlm, type TwoTierOptions } from '../../src/providers/llm/twotier.js';
import type { LlmTurn } from '../../src/providers/llm/types.js';
import { type ChatMessage, ProviderError } from '../../src/providers/openai-client.js';
import { silentLogger } from '../../src/util/log.js';
import { FakeBridge } from '../support/fake-bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';

const LOCAL_KEY = 'sk-local-test-key';
const CLOUD_KEY = 'sk-cloud-test-key';
const LOCAL_MODEL = 'local-4b-model';
const SMART_MODEL = 'cloud-smart-model';
const SYSTEM_PROMPT = 'TOP-LEVEL PROMPT: you are the voice server prompt.';
const NINE = ['😊', '😆', '😢', '😮', '🤔', '😠', '😐', '😍', '😴'];

let local: FakeOpenAi;
let bridge: FakeBridge;
let extra: Array<{ close(): Promise<void> }>;
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'deskbot-twotier-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeEach(async () => {
  local = await new FakeOpenAi().start();
  bridge = await new FakeBridge().start();
  extra = [];
});

afterEach(async () => {
  await Promise.all([local.close(), bridge.close(), ...extra.map((s) => s.close())]);
});

async function startFakeOpenAi(): Promise<FakeOpenAi> {
  const fake = await new FakeOpenAi().start();
  extra.push(fake);
  return fake;
}

/** A loopback URL where nothing listens (connection refused). */
async function closedPortUrl(path = ''): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}${path}`;
}

async function makeLlm(
  over: Partial<TwoTierOptions> & { bridgeUrl?: string; cloudKey?: string; cloudUrl?: string } = {},
): Promise<TwoTierLlm> {
  const { bridgeUrl, cloudKey, cloudUrl, ...rest } = over;
  return new TwoTierLlm({
    local: { url: local.url, apiKey: LOCAL_KEY, model: LOCAL_MODEL },
    // A cloud that must not be used unless a test points it at a fake.
    cloud: { url: cloudUrl ?? (await closedPortUrl('/v1')), apiKey: cloudKey ?? '', model: SMART_MODEL },
    smartMode: false,
    maxTokens: 256,
    temperature: 0.7,
    timeoutSec: 5,
    personaFile: '',
    bridge: new BridgeClient({ url: bridgeUrl ?? bridge.url, logger: silentLogger }),
    shortTimeoutMs: 5_000,
    longTimeoutMs: 30_000,
    logger: silentLogger,
    ...rest,
  });
}

interface Said {
  text: string;
  at: number;
}

function makeTurn(over: Partial<LlmTurn> = {}): { turn: LlmTurn; said: Said[] } {
  const said: Said[] = [];
  const turn: LlmTurn = {
    sessionId: 'session-42',
    deviceId: 'aa:bb:cc:dd:ee:ff',
    history: [{ role: 'user', content: 'Hello robot' }],
    systemPrompt: SYSTEM_PROMPT,
    kidMode: false,
    signal: new AbortController().signal,
    say: (text) => said.push({ text, at: performance.now() }),
    ...over,
  };
  return { turn, said };
}

async function run(llm: TwoTierLlm, turn: LlmTurn): Promise<{ chunks: string[]; text: string; ms: number }> {
  const started = performance.now();
  const chunks: string[] = [];
  for await (const chunk of llm.reply(turn)) chunks.push(chunk);
  return { chunks, text: chunks.join(''), ms: performance.now() - started };
}

async function fails(
  llm: TwoTierLlm,
  turn: LlmTurn,
): Promise<{ error: ProviderError; chunks: string[]; ms: number }> {
  const started = performance.now();
  const chunks: string[] = [];
  try {
    for await (const chunk of llm.reply(turn)) chunks.push(chunk);
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return { error: error as ProviderError, chunks, ms: performance.now() - started };
  }
  throw new Error(`expected reply() to throw; it ended normally with ${JSON.stringify(chunks.join(''))}`);
}

async function until(what: string, condition: () => boolean, timeoutMs = 4_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function messagesOf(fake: FakeOpenAi, index: number): ChatMessage[] {
  const request = fake.chatRequests()[index];
  if (!request) throw new Error(`no chat request #${index} (got ${fake.chatRequests().length})`);
  return request.body.messages as ChatMessage[];
}

function toolMessages(fake: FakeOpenAi, index: number): ChatMessage[] {
  return messagesOf(fake, index).filter((m) => m.role === 'tool');
}

describe('plain turn', () => {
  it('sends model, max_tokens 256, temperature 0.7, stream, the four tools, tool_choice auto and the bearer key; the reply is the answer; no escalation', async () => {
    local.script({ text: '😊 The answer is here.' });
    const llm = await makeLlm();
    const { turn } = makeTurn();
    const { text } = await run(llm, turn);
    expect(text).toBe('😊 The answer is here.');

    const requests = local.chatRequests();
    expect(requests).toHaveLength(1);
    const request = requests[0]!;
    expect(request.path).toBe('/v1/chat/completions');
    expect(request.headers.authorization).toBe(`Bearer ${LOCAL_KEY}`);
    expect(request.body).toMatchObject({
      model: LOCAL_MODEL,
      max_tokens: 256,
      temperature: 0.7,
      stream: true,
      tool_choice: 'auto',
    });
    const tools = request.body.tools as Array<{ type: string; function: { name: string; parameters: any } }>;
    expect(tools.map((t) => t.function.name).sort()).toEqual(
      ['memory_lookup', 'play_song', 'take_photo', 'think_hard'].sort(),
    );
    const schema = (name: string) => tools.find((t) => t.function.name === name)!.function.parameters;
    for (const tool of tools) expect(tool.type).toBe('function');
    for (const [name, arg] of [
      ['memory_lookup', 'query'],
      ['think_hard', 'question'],
      ['play_song', 'name'],
    ] as const) {
      expect(schema(name)).toMatchObject({ type: 'object', properties: { [arg]: { type: 'string' } } });
      expect(Object.keys(schema(name).properties)).toEqual([arg]);
      expect(schema(name).required).toEqual([arg]);
    }
    expect(schema('take_photo').type).toBe('object');
    expect(Object.keys(schema('take_photo').properties ?? {})).toEqual([]);
    expect(schema('take_photo').required ?? []).toEqual([]);

    // The side channel still runs at the end of the turn; wait for it so "no escalation" is not judged early.
    await until('memory_log', () => bridge.posted('/api/voice/memory_log').length === 1);
    expect(bridge.posted('/api/voice/escalate')).toEqual([]);
  });
});

describe('persona and system messages', () => {
  const history: ChatMessage[] = [
    { role: 'system', content: 'HISTORY SYSTEM: the user is called Sam.' },
    { role: 'user', content: 'Hi there' },
    { role: 'assistant', content: '😊 Hello!' },
    { role: 'user', content: 'How are you?' },
  ];

  it('a persona file is the one system message; the turn prompt and dialogue system messages are not sent', async () => {
    const file = join(dir, 'voice-persona.md');
    writeFileSync(file, 'PERSONA FILE: you are Pip from the persona file.\n');
    const llm = await makeLlm({ personaFile: file });
    await run(llm, makeTurn({ history }).turn);
    const messages = messagesOf(local, 0);
    const systems = messages.filter((m) => m.role === 'system');
    expect(systems).toHaveLength(1);
    expect(messages[0]!.role).toBe('system');
    expect(messages[0]!.content).toContain('PERSONA FILE: you are Pip from the persona file.');
    const all = JSON.stringify(messages);
    expect(all).not.toContain('TOP-LEVEL PROMPT');
    expect(all).not.toContain('HISTORY SYSTEM');
    // The dialogue itself is kept, in order.
    expect(messages.filter((m) => m.role !== 'system').map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'user',
    ]);
  });

  it("with personaFile '' the turn prompt and the dialogue's system messages are merged into one system message", async () => {
    const llm = await makeLlm({ personaFile: '' });
    await run(llm, makeTurn({ history }).turn);
    const messages = messagesOf(local, 0);
    const systems = messages.filter((m) => m.role === 'system');
    expect(systems).toHaveLength(1);
    expect(messages[0]!.role).toBe('system');
    expect(systems[0]!.content).toContain(SYSTEM_PROMPT);
    expect(systems[0]!.content).toContain('HISTORY SYSTEM: the user is called Sam.');
  });

  it('a persona file that does not exist falls back to the merge', async () => {
    const llm = await makeLlm({ personaFile: join(dir, 'no-such-persona.md') });
    await run(llm, makeTurn({ history }).turn);
    const systems = messagesOf(local, 0).filter((m) => m.role === 'system');
    expect(systems).toHaveLength(1);
    expect(systems[0]!.content).toContain(SYSTEM_PROMPT);
    expect(systems[0]!.content).toContain('HISTORY SYSTEM: the user is called Sam.');
  });
});

describe('per-turn rules', () => {
  const history: ChatMessage[] = [
    { role: 'user', content: 'First question' },
    { role: 'assistant', content: '😊 First answer.' },
    { role: 'user', content: 'Second question' },
  ];

  it('the last user message gets the emoji rule and the English-only rule; kid mode adds the kid rule; earlier messages are untouched', async () => {
    const llm = await makeLlm();
    await run(llm, makeTurn({ history, kidMode: false }).turn);
    await run(llm, makeTurn({ history, kidMode: true }).turn);

    const grown = messagesOf(local, 0).filter((m) => m.role !== 'system');
    const kid = messagesOf(local, 1).filter((m) => m.role !== 'system');
    for (const dialogue of [grown, kid]) {
      expect(dialogue[0]).toEqual({ role: 'user', content: 'First question' });
      expect(dialogue[1]).toEqual({ role: 'assistant', content: '😊 First answer.' });
      const last = dialogue[2]!.content!;
      expect(last.startsWith('Second question')).toBe(true);
      for (const emoji of NINE) expect(last).toContain(emoji);
      expect(last).toMatch(/English/i);
    }
    const grownLast = grown[2]!.content!;
    const kidLast = kid[2]!.content!;
    expect(grownLast).not.toMatch(/child|kid/i);
    expect(kidLast).toMatch(/child|kid/i);
    expect(kidLast.length).toBeGreaterThan(grownLast.length);
    // The caller's history is not modified.
    expect(history[2]!.content).toBe('Second question');
  });
});

describe('tool calls', () => {
  it('memory_lookup is escalated with {tool, args, session_id}; the result goes back as a tool message; the final answer streams', async () => {
    bridge.escalations.memory_lookup = { result: 'Your cat is called Tom.' };
    local.script(
      { toolCalls: [{ name: 'memory_lookup', arguments: { query: 'cat' } }] },
      { text: '😊 Your cat is called Tom.', chunkChars: 3 },
    );
    const llm = await makeLlm();
    const { turn, said } = makeTurn({ history: [{ role: 'user', content: 'What is my cat called?' }] });
    const { chunks, text } = await run(llm, turn);

    expect(bridge.posted('/api/voice/escalate')).toEqual([
      { tool: 'memory_lookup', args: { query: 'cat' }, session_id: 'session-42' },
    ]);
    expect(local.chatRequests()).toHaveLength(2);
    const second = messagesOf(local, 1);
    const assistant = second.find((m) => m.role === 'assistant' && m.tool_calls);
    expect(assistant?.tool_calls).toHaveLength(1);
    const call = assistant!.tool_calls![0]!;
    expect(call.type).toBe('function');
    expect(call.function.name).toBe('memory_lookup');
    expect(JSON.parse(call.function.arguments)).toEqual({ query: 'cat' });
    const tools = toolMessages(local, 1);
    expect(tools).toEqual([{ role: 'tool', tool_call_id: call.id, content: 'Your cat is called Tom.' }]);
    expect(call.id).toBeTruthy();
    // The tool message follows the assistant message that asked for it.
    expect(second.indexOf(assistant!)).toBe(second.length - 2);

    expect(text).toBe('😊 Your cat is called Tom.');
    expect(chunks.length).toBeGreaterThan(1); // streamed, not one blob
    expect(said).toEqual([]);
  });

  it('two tool calls in one reply: both escalated, each tool message answers its own call id', async () => {
    bridge.escalations.memory_lookup = { result: 'memory says hi' };
    bridge.escalations.play_song = { result: 'playing happy birthday' };
    local.script(
      {
        toolCalls: [
          { name: 'memory_lookup', arguments: { query: 'birthday' } },
          { name: 'play_song', arguments: { name: 'happy birthday' } },
        ],
      },
      { text: '😆 Happy birthday!' },
    );
    const llm = await makeLlm();
    const { text } = await run(llm, makeTurn().turn);
    expect(text).toBe('😆 Happy birthday!');
    const assistant = messagesOf(local, 1).find((m) => m.role === 'assistant' && m.tool_calls)!;
    const ids = Object.fromEntries(assistant.tool_calls!.map((c) => [c.function.name, c.id]));
    expect(new Set(Object.values(ids)).size).toBe(2);
    const tools = toolMessages(local, 1);
    expect(tools).toHaveLength(2);
    expect(tools.find((t) => t.tool_call_id === ids.memory_lookup)?.content).toBe('memory says hi');
    expect(tools.find((t) => t.tool_call_id === ids.play_song)?.content).toBe('playing happy birthday');
  });

  it('a result longer than 1000 characters reaches the model truncated to 1000', async () => {
    const long = 'abcdefghij'.repeat(150); // 1500 characters
    bridge.escalations.think_hard = { result: long };
    local.script(
      { toolCalls: [{ name: 'think_hard', arguments: { question: 'why is the sky blue?' } }] },
      { text: '🤔 Because of scattering.' },
    );
    const llm = await makeLlm();
    const { text } = await run(llm, makeTurn().turn);
    expect(text).toBe('🤔 Because of scattering.');
    const content = toolMessages(local, 1)[0]!.content!;
    expect(content).toHaveLength(1000);
    expect(content).toBe(long.slice(0, 1000));
  });

  it('take_photo speaks a 😮 filler before the escalation resolves, with args {}', async () => {
    bridge.escalations.take_photo = { result: 'A cat sits on a desk.', delayMs: 300 };
    local.script(
      { toolCalls: [{ name: 'take_photo', arguments: {} }] },
      { text: '😮 I see a cat on the desk.' },
    );
    const llm = await makeLlm();
    const { turn, said } = makeTurn({ history: [{ role: 'user', content: 'What do you see?' }] });
    const { text } = await run(llm, turn);

    expect(text).toBe('😮 I see a cat on the desk.');
    const escalations = bridge.requests.filter((r) => r.path === '/api/voice/escalate');
    expect(escalations.map((r) => r.body)).toEqual([
      { tool: 'take_photo', args: {}, session_id: 'session-42' },
    ]);
    expect(said).toHaveLength(1);
    expect(said[0]!.text.startsWith('😮')).toBe(true);
    expect(said[0]!.text.replace('😮', '').trim().length).toBeGreaterThan(0);
    // The bridge cannot answer before escalateAt + 300 ms; the filler came before that.
    expect(said[0]!.at).toBeLessThan(escalations[0]!.at + 300);
    expect(toolMessages(local, 1)[0]!.content).toBe('A cat sits on a desk.');
  });

  it.each([
    ['memory_lookup', { query: 'cat' }],
    ['think_hard', { question: 'what is 17 times 23?' }],
    ['play_song', { name: 'twinkle twinkle' }],
  ] as const)('%s is silent: say is never called', async (tool, args) => {
    bridge.escalations[tool] = { result: `${tool} done`, delayMs: 100 };
    local.script({ toolCalls: [{ name: tool, arguments: args }] }, { text: '😊 Done.' });
    const llm = await makeLlm();
    const { turn, said } = makeTurn();
    const { text } = await run(llm, turn);
    expect(text).toBe('😊 Done.');
    expect(bridge.posted('/api/voice/escalate')).toEqual([{ tool, args, session_id: 'session-42' }]);
    expect(toolMessages(local, 1)[0]!.content).toBe(`${tool} done`);
    expect(said).toEqual([]);
  });
});

describe('escalation timeouts', () => {
  it('memory_lookup past the short timeout → "(memory_lookup took too long)", ending at about the timeout', async () => {
    bridge.escalations.memory_lookup = { result: 'too late', delayMs: 2_000 };
    let secondAt = 0;
    local.script({ toolCalls: [{ name: 'memory_lookup', arguments: { query: 'cat' } }] });
    local.responder = () => {
      secondAt = performance.now();
      return { text: '😐 I could not remember in time.' };
    };
    const llm = await makeLlm({ shortTimeoutMs: 300, longTimeoutMs: 1_500 });
    const { text } = await run(llm, makeTurn().turn);

    expect(text).toBe('😐 I could not remember in time.');
    expect(toolMessages(local, 1)[0]!.content).toBe('(memory_lookup took too long)');
    const escalateAt = bridge.requests.find((r) => r.path === '/api/voice/escalate')!.at;
    const took = secondAt - escalateAt;
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(1_500); // well before the bridge's 2000 ms answer
  });

  it('think_hard uses the long timeout: a 600 ms answer succeeds while memory_lookup with the same delay times out', async () => {
    bridge.escalations.think_hard = { result: 'It is 391.', delayMs: 600 };
    bridge.escalations.memory_lookup = { result: 'You like cats.', delayMs: 600 };
    const llm = await makeLlm({ shortTimeoutMs: 300, longTimeoutMs: 1_500 });

    local.script(
      { toolCalls: [{ name: 'think_hard', arguments: { question: '17 * 23?' } }] },
      { text: '🤔 It is 391.' },
    );
    expect((await run(llm, makeTurn().turn)).text).toBe('🤔 It is 391.');
    expect(toolMessages(local, 1)[0]!.content).toBe('It is 391.');

    local.script(
      { toolCalls: [{ name: 'memory_lookup', arguments: { query: 'likes' } }] },
      { text: '😐 I am not sure.' },
    );
    expect((await run(llm, makeTurn().turn)).text).toBe('😐 I am not sure.');
    expect(toolMessages(local, 3)[0]!.content).toBe('(memory_lookup took too long)');
  });

  it('an escalation answered with HTTP 500 → "(<tool> unavailable)"', async () => {
    bridge.escalations.play_song = { status: 500 };
    local.script({ toolCalls: [{ name: 'play_song', arguments: { name: 'x' } }] }, { text: '😢 I cannot.' });
    const llm = await makeLlm();
    expect((await run(llm, makeTurn().turn)).text).toBe('😢 I cannot.');
    expect(toolMessages(local, 1)[0]!.content).toBe('(play_song unavailable)');
  });
});

describe('bridge down', () => {
  it('a plain turn still answers', async () => {
    local.script({ text: '😊 Still here.' });
    const llm = await makeLlm({ bridgeUrl: await closedPortUrl() });
    const { text, ms } = await run(llm, makeTurn().turn);
    expect(text).toBe('😊 Still here.');
    expect(ms).toBeLessThan(2_000);
  });

  it('a tool turn sends "(memory_lookup unavailable)" to the model and still gives its final answer', async () => {
    local.script(
      { toolCalls: [{ name: 'memory_lookup', arguments: { query: 'cat' } }] },
      { text: '😐 My memory is offline right now.' },
    );
    const llm = await makeLlm({ bridgeUrl: await closedPortUrl() });
    const { text, ms } = await run(llm, makeTurn().turn);
    expect(text).toBe('😐 My memory is offline right now.');
    expect(toolMessages(local, 1)[0]!.content).toBe('(memory_lookup unavailable)');
    expect(ms).toBeLessThan(3_000); // the short timeout is 5 s: a refused connection must not wait for it
  });
});

describe('memory side channel', () => {
  const REPLY = '😊 Okay, I will remember that. [REMEMBER: Sam likes cats]';
  const userWords = 'I like cats, please remember that';

  it('[REMEMBER: fact] split across chunks is stripped from speech; remember and memory_log are posted', async () => {
    local.script({ text: REPLY, chunkChars: 3 });
    const llm = await makeLlm();
    const { chunks, text } = await run(
      llm,
      makeTurn({
        history: [
          { role: 'user', content: 'Hello robot' },
          { role: 'assistant', content: '😊 Hello!' },
          { role: 'user', content: userWords },
        ],
      }).turn,
    );

    expect(text.trim()).toBe('😊 Okay, I will remember that.');
    for (const chunk of chunks) {
      expect(chunk).not.toContain('[');
      expect(chunk).not.toContain(']');
    }
    expect(text).not.toMatch(/REMEMBER|Sam likes/);

    await until('remember and memory_log', () => {
      return (
        bridge.posted('/api/voice/remember').length >= 1 && bridge.posted('/api/voice/memory_log').length >= 1
      );
    });
    expect(bridge.posted('/api/voice/remember')).toEqual([
      { fact: 'Sam likes cats', session_id: 'session-42' },
    ]);
    const logs = bridge.posted('/api/voice/memory_log');
    expect(logs).toHaveLength(1);
    expect(logs[0]).toEqual({ user: userWords, assistant: text.trim(), session_id: 'session-42' });
    expect(logs[0].assistant).not.toContain('REMEMBER');
  });

  it('a marker in the middle of the reply is removed and the rest is spoken', async () => {
    local.script({ text: '😊 Got it [REMEMBER: birthday is May 3] and noted.', chunkChars: 2 });
    const llm = await makeLlm();
    const { text } = await run(llm, makeTurn().turn);
    expect(text).not.toMatch(/\[|\]|REMEMBER|May 3/);
    expect(text.replace(/\s+/g, ' ')).toBe('😊 Got it and noted.');
    await until('remember', () => bridge.posted('/api/voice/remember').length === 1);
    expect(bridge.posted('/api/voice/remember')[0]).toEqual({
      fact: 'birthday is May 3',
      session_id: 'session-42',
    });
  });

  it('with the bridge down the turn completes promptly and nothing is raised', async () => {
    local.script({ text: REPLY, chunkChars: 3 });
    const llm = await makeLlm({ bridgeUrl: await closedPortUrl() });
    const { text, ms } = await run(llm, makeTurn().turn);
    expect(text.trim()).toBe('😊 Okay, I will remember that.');
    expect(ms).toBeLessThan(1_500);
    // Give the fire-and-forget posts time to fail; an unhandled rejection would fail this test file.
    await new Promise((resolve) => setTimeout(resolve, 300));
  });

  it('a side channel that answers only after 5 s does not delay the turn', async () => {
    bridge.sideChannelDelayMs = 5_000;
    local.script({ text: REPLY, chunkChars: 3 });
    const llm = await makeLlm();
    const { text, ms } = await run(llm, makeTurn().turn);
    expect(text.trim()).toBe('😊 Okay, I will remember that.');
    expect(ms).toBeLessThan(1_500);
    // The posts were made (the bridge saw them) even though their answers are late.
    await until('side-channel posts', () => {
      return (
        bridge.posted('/api/voice/remember').length === 1 &&
        bridge.posted('/api/voice/memory_log').length === 1
      );
    });
    // The next turn on the same provider is not held up either.
    local.script({ text: '😊 Next.' });
    const next = await run(llm, makeTurn().turn);
    expect(next.text).toBe('😊 Next.');
    expect(next.ms).toBeLessThan(1_500);
  });

  it('the side-channel posts give up after about 2 s (client timeout)', async () => {
    bridge.sideChannelDelayMs = 10_000;
    local.script({ text: REPLY });
    const llm = await makeLlm();
    await run(llm, makeTurn().turn);
    await until('side-channel posts', () => {
      return (
        bridge.posted('/api/voice/remember').length === 1 &&
        bridge.posted('/api/voice/memory_log').length === 1
      );
    });
    const postedAt = bridge.requests.find((r) => r.path === '/api/voice/memory_log')!.at;
    // The fake keeps each unanswered response in its (private) open set until the client hangs up.
    const open = (bridge as unknown as { open: Set<unknown> }).open;
    expect(open.size).toBe(2);
    await until('the client to hang up', () => open.size === 0, 6_000);
    const gaveUpAfter = performance.now() - postedAt;
    expect(gaveUpAfter).toBeGreaterThanOrEqual(1_500);
    expect(gaveUpAfter).toBeLessThan(4_000);
  });
});

describe('leading emoji', () => {
  it.each([
    ['It is sunny.', '😐 It is sunny.'],
    ['😊 Hi', '😊 Hi'],
    ['🙂 Hi', '😐 🙂 Hi'],
  ])('%j → %j', async (reply, expected) => {
    local.script({ text: reply, chunkChars: 2 });
    const llm = await makeLlm();
    const { chunks, text } = await run(llm, makeTurn().turn);
    expect(text).toBe(expected);
    expect(chunks[0]!.startsWith(expected.startsWith('😐 ') ? '😐 ' : '😊')).toBe(true);
  });

  it.each(NINE)('%s is one of the nine and is kept', async (emoji) => {
    local.script({ text: `${emoji} Fine.` });
    const llm = await makeLlm();
    expect((await run(llm, makeTurn().turn)).text).toBe(`${emoji} Fine.`);
  });
});

describe('smart mode', () => {
  it('turning it on with no cloud key throws no_cloud_key; nothing changes and the next turn stays local', async () => {
    const llm = await makeLlm({ cloudKey: '' });
    let thrown: unknown;
    try {
      llm.setSmartMode(true);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ProviderConfigError);
    expect((thrown as ProviderConfigError).code).toBe('no_cloud_key');
    expect(llm.smartMode).toBe(false);

    local.script({ text: '😊 Local answer.' });
    expect((await run(llm, makeTurn().turn)).text).toBe('😊 Local answer.');
    expect(local.chatRequests()).toHaveLength(1);
    expect(local.chatRequests()[0]!.body.model).toBe(LOCAL_MODEL);
  });

  it('configured on with no cloud key, the provider starts local instead of failing', async () => {
    const llm = await makeLlm({ cloudKey: '', smartMode: true });
    expect(llm.smartMode).toBe(false);
    await run(llm, makeTurn().turn);
    expect(local.chatRequests()).toHaveLength(1);
  });

  it('with a cloud key the next turn goes to the cloud with the smart model and the cloud key; flipping back returns to local', async () => {
    const cloud = await startFakeOpenAi();
    cloud.responder = () => ({ text: '😎 Cloud answer.' });
    const llm = await makeLlm({ cloudUrl: cloud.url, cloudKey: CLOUD_KEY });

    llm.setSmartMode(true);
    expect(llm.smartMode).toBe(true);
    const smart = await run(llm, makeTurn().turn);
    expect(smart.text).toBe('😐 😎 Cloud answer.'); // 😎 is not one of the nine
    expect(local.chatRequests()).toHaveLength(0);
    expect(cloud.chatRequests()).toHaveLength(1);
    const request = cloud.chatRequests()[0]!;
    expect(request.body.model).toBe(SMART_MODEL);
    expect(request.headers.authorization).toBe(`Bearer ${CLOUD_KEY}`);

    llm.setSmartMode(false);
    expect(llm.smartMode).toBe(false);
    local.script({ text: '😊 Local again.' });
    expect((await run(llm, makeTurn().turn)).text).toBe('😊 Local again.');
    expect(cloud.chatRequests()).toHaveLength(1);
    expect(local.chatRequests()).toHaveLength(1);
    expect(local.chatRequests()[0]!.body.model).toBe(LOCAL_MODEL);
    expect(local.chatRequests()[0]!.headers.authorization).toBe(`Bearer ${LOCAL_KEY}`);
  });

  it('a flip while a turn is streaming does not change that turn; it applies to the next one', async () => {
    const cloud = await startFakeOpenAi();
    cloud.responder = () => ({ text: '😊 From the cloud.' });
    const llm = await makeLlm({ cloudUrl: cloud.url, cloudKey: CLOUD_KEY });
    local.script({ text: '😊 One two three four five six.', chunkChars: 3, chunkDelayMs: 30 });

    const chunks: string[] = [];
    for await (const chunk of llm.reply(makeTurn().turn)) {
      if (chunks.length === 0) llm.setSmartMode(true);
      chunks.push(chunk);
    }
    expect(chunks.join('')).toBe('😊 One two three four five six.');
    expect(cloud.chatRequests()).toHaveLength(0);

    expect((await run(llm, makeTurn().turn)).text).toBe('😊 From the cloud.');
    expect(cloud.chatRequests()).toHaveLength(1);
    expect(local.chatRequests()).toHaveLength(1);
  });

  it("a flip during a tool escalation does not move that turn's second model call", async () => {
    const cloud = await startFakeOpenAi();
    const llm = await makeLlm({ cloudUrl: cloud.url, cloudKey: CLOUD_KEY });
    bridge.escalations.memory_lookup = { result: 'Tom', delayMs: 300 };
    local.script(
      { toolCalls: [{ name: 'memory_lookup', arguments: { query: 'cat' } }] },
      { text: '😊 Your cat is Tom.' },
    );
    const pending = run(llm, makeTurn().turn);
    await until('the escalation', () => bridge.posted('/api/voice/escalate').length === 1);
    llm.setSmartMode(true);
    expect((await pending).text).toBe('😊 Your cat is Tom.');
    expect(local.chatRequests()).toHaveLength(2);
    expect(cloud.chatRequests()).toHaveLength(0);
  });
});

describe('hotSwap', () => {
  it('a blank api_key over a non-empty one throws blank_api_key and changes nothing', async () => {
    const other = await startFakeOpenAi();
    const llm = await makeLlm();
    let thrown: unknown;
    try {
      llm.hotSwap({ model: 'other-model', url: other.url, apiKey: '' });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ProviderConfigError);
    expect((thrown as ProviderConfigError).code).toBe('blank_api_key');
    expect(llm.active).toMatchObject({ url: local.url, model: LOCAL_MODEL, apiKey: LOCAL_KEY });

    await run(llm, makeTurn().turn);
    expect(other.chatRequests()).toHaveLength(0);
    expect(local.chatRequests()).toHaveLength(1);
    expect(local.chatRequests()[0]!.body.model).toBe(LOCAL_MODEL);
    expect(local.chatRequests()[0]!.headers.authorization).toBe(`Bearer ${LOCAL_KEY}`);
  });

  it('a valid swap sends the next request to the new url, model and key', async () => {
    const other = await startFakeOpenAi();
    other.responder = () => ({ text: '😊 New model here.' });
    const llm = await makeLlm();
    llm.hotSwap({ model: 'swapped-model', url: other.url, apiKey: 'sk-swapped' });
    const { text } = await run(llm, makeTurn().turn);
    expect(text).toBe('😊 New model here.');
    expect(local.chatRequests()).toHaveLength(0);
    expect(other.chatRequests()).toHaveLength(1);
    expect(other.chatRequests()[0]!.body.model).toBe('swapped-model');
    expect(other.chatRequests()[0]!.headers.authorization).toBe('Bearer sk-swapped');
  });
});

describe('model failures end the turn with a ProviderError, never a hang', () => {
  it('connection refused → unreachable', async () => {
    const llm = await makeLlm({ local: { url: await closedPortUrl('/v1'), apiKey: LOCAL_KEY, model: 'm' } });
    const { error, ms } = await fails(llm, makeTurn().turn);
    expect(error.code).toBe('unreachable');
    expect(ms).toBeLessThan(3_000);
  });

  it.each([401, 500])('HTTP %i → http with that status', async (status) => {
    local.script({ status });
    const llm = await makeLlm();
    const { error, ms } = await fails(llm, makeTurn().turn);
    expect(error.code).toBe('http');
    expect(error.status).toBe(status);
    expect(ms).toBeLessThan(3_000);
  });

  it('a malformed stream chunk → malformed', async () => {
    local.script({ text: '😊 Partial', malformed: true });
    const llm = await makeLlm();
    const { error, ms } = await fails(llm, makeTurn().turn);
    expect(error.code).toBe('malformed');
    expect(ms).toBeLessThan(3_000);
  });

  it('a stream that stalls → stalled/timeout within about timeoutSec', async () => {
    local.script({
      text: '😊 This answer starts and then stops forever.',
      chunkChars: 4,
      stallAfterChunks: 2,
    });
    const llm = await makeLlm({ timeoutSec: 1 });
    const { error, ms } = await fails(llm, makeTurn().turn);
    expect(['stalled', 'timeout']).toContain(error.code);
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(4_000);
  });

  it('response headers that never arrive → timeout within about timeoutSec', async () => {
    local.script({ delayMs: 10_000, text: '😊 Too late.' });
    const llm = await makeLlm({ timeoutSec: 1 });
    const { error, ms } = await fails(llm, makeTurn().turn);
    expect(error.code).toBe('timeout');
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(4_000);
  });

  it('the second model call (after a tool) failing also throws', async () => {
    local.script({ toolCalls: [{ name: 'memory_lookup', arguments: { query: 'x' } }] }, { status: 500 });
    const llm = await makeLlm();
    const { error, ms } = await fails(llm, makeTurn().turn);
    expect(error.code).toBe('http');
    expect(error.status).toBe(500);
    expect(ms).toBeLessThan(3_000);
  });
});
