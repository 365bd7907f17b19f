// The bridge's LAN API over real HTTP (SPEC "Bridge", "Message record", "Memory side-channel records",
// "Errors"; DESIGN §2/§3): the agent-path message routes against the REAL embedded agent (a child process
// whose model is a scripted OpenAI-compatible server), the escalation tools, the memory side channel, the
// error shape of every POST route, /health, and the /v1 pass-through to the local router.
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDate } from '../../src/agent/memory.js';
import { AGENT_FALLBACK_REPLY } from '../../src/bridge/message-rules.js';
import { DEAD_AGENT, EMBEDDED_AGENT, type RunningBridge, TestBridges } from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { expectErrorShape, healthy, post, request } from '../support/http.js';
import { freePort } from '../support/net.js';

// ---- helpers -------------------------------------------------------------------------------------------------

const NINE = ['😊', '😆', '😢', '😮', '🤔', '😠', '😐', '😍', '😴'];
const bridges = new TestBridges('deskbot-bridge-routes-');
const bridgeWith = (
  raw: Record<string, unknown>,
  agentCommand: readonly string[],
  agentEnv?: Record<string, string>,
) => bridges.start(raw, agentCommand, agentEnv);

/** NDJSON lines of a streaming reply, each with the time it arrived. */
async function streamLines(
  base: string,
  body: unknown,
): Promise<{
  status: number;
  contentType: string;
  lines: Array<{ value: any; at: number }>;
}> {
  const response = await fetch(`${base}/api/message/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const lines: Array<{ value: any; at: number }> = [];
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline = buffer.indexOf('\n');
    while (newline >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      if (line.trim()) lines.push({ value: JSON.parse(line), at: Date.now() });
      newline = buffer.indexOf('\n');
    }
  }
  expect(buffer.trim(), 'a trailing line without its newline').toBe('');
  return { status: response.status, contentType: response.headers.get('content-type') ?? '', lines };
}

/** A recording stand-in for the voice server's admin routes (VOICE_URL). */
class FakeVoice {
  readonly requests: Array<{ method: string; path: string; body: any }> = [];
  private server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createHttpServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this;
  }

  calls(route: string): number {
    return this.requests.filter((r) => r.path === `/device/admin/${route}`).length;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString();
    const path = (req.url ?? '').split('?')[0]!;
    this.requests.push({ method: req.method ?? '', path, body: raw ? JSON.parse(raw) : undefined });
    const send = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (path === '/device/admin/songs')
      return send({ songs: [{ name: 'Happy Birthday' }, { name: 'Purr' }] });
    if (path === '/device/admin/take-photo') {
      return send({ result: JSON.stringify({ success: true, response: 'A purple elephant is dancing.' }) });
    }
    return send({ ok: true });
  }
}

/** Accepts TCP connections and never answers a byte. */
async function silentServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: NetServer = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- the fixtures --------------------------------------------------------------------------------------------

let models: FakeOpenAi; // the embedded agent's model
let router: FakeOpenAi; // the local model router
let voice: FakeVoice;
let silent: Awaited<ReturnType<typeof silentServer>>;

/** Embedded agent, voice = FakeVoice, no cloud key, no local router, MAX_SENTENCES default. */
let main: RunningBridge;
/** Embedded agent, MAX_SENTENCES = 2. */
let two: RunningBridge;
/** Agent runtime down (exits at once), short turn deadline, voice server unreachable. */
let down: RunningBridge;
/** Agent down; voice accepts but never answers; timeout_short 1 s; a local router. */
let upstream: RunningBridge;
/** Agent down; voice = FakeVoice; a cloud key, so vision is available. */
let vision: RunningBridge;

const lastAgentRequest = () => models.chatRequests().at(-1)!;
const lastUserText = () => lastAgentRequest().body.messages.at(-1).content as string;

beforeAll(async () => {
  models = await new FakeOpenAi().start();
  models.responder = () => ({ text: '😊 Default scripted reply.' });
  router = await new FakeOpenAi().start();
  voice = await new FakeVoice().start();
  silent = await silentServer();
  const agentEnv = { AGENT_MODEL_URL: models.url };
  [main, two, down, upstream, vision] = await Promise.all([
    bridgeWith({ bridge: { voice_url: voice.url } }, EMBEDDED_AGENT, agentEnv),
    bridgeWith(
      { bridge: { voice_url: `http://127.0.0.1:${await freePort()}`, max_sentences: 2 } },
      EMBEDDED_AGENT,
      agentEnv,
    ),
    bridgeWith(
      { bridge: { voice_url: `http://127.0.0.1:${await freePort()}` }, agent: { turn_timeout: 2 } },
      DEAD_AGENT,
    ),
    bridgeWith(
      {
        bridge: { voice_url: silent.url, timeout_short: 1 },
        local_router: { url: router.url, think_model: 'deep-thinker-test' },
      },
      DEAD_AGENT,
    ),
    bridgeWith({ bridge: { voice_url: voice.url }, cloud: { api_key: 'test-cloud-key' } }, DEAD_AGENT),
  ]);
  await healthy(main.url, 30_000);
  await healthy(two.url, 30_000);
}, 90_000);

afterAll(async () => {
  await bridges.closeAll();
  await models?.close();
  await router?.close();
  await voice?.close();
  await silent?.close();
}, 30_000);

// ---- /api/message --------------------------------------------------------------------------------------------

describe('/api/message', () => {
  it.each(['deskbot', 'desk-bot'])(
    'robot channel "%s": the instruction sandwich surrounds the words',
    async (channel) => {
      const words = `what is the weather like on Mars (${channel})`;
      models.script({ text: '😊 Cold and dusty.' });
      const reply = await post(main.url, '/api/message', { content: words, channel });
      expect(reply.status, reply.text).toBe(200);
      expect(reply.json).toEqual({ response: '😊 Cold and dusty.' });

      const sent = lastUserText();
      const at = sent.indexOf(words);
      expect(at, sent).toBeGreaterThan(0);
      const before = sent.slice(0, at);
      const after = sent.slice(at + words.length);
      expect(after.trim().length, 'text after the user words').toBeGreaterThan(0);
      for (const part of [before, after]) {
        expect(part).toMatch(/English only/i);
        for (const emoji of NINE) expect(part).toContain(emoji);
      }
      expect(sent, 'no kid rules while kid mode is off').not.toMatch(/child|kid mode/i);
    },
  );

  it('kid mode (POST /admin/kid-mode) adds the kid sandwich; off again removes it', async () => {
    const on = await post(main.url, '/admin/kid-mode', { enabled: true });
    expect(on.status, on.text).toBe(200);
    try {
      const words = 'tell me about dinosaurs';
      models.script({ text: '😊 Dinosaurs were big.' });
      const reply = await post(main.url, '/api/message', { content: words, channel: 'deskbot' });
      expect(reply.json).toEqual({ response: '😊 Dinosaurs were big.' });
      const sent = lastUserText();
      const at = sent.indexOf(words);
      expect(at).toBeGreaterThan(0);
      expect(sent.slice(0, at)).toMatch(/child/i);
      expect(sent.slice(0, at)).toMatch(/English only/i);
      expect(sent.slice(at + words.length)).toMatch(/kid mode/i);
      expect(sent.slice(at + words.length)).toMatch(/English only/i);
    } finally {
      const off = await post(main.url, '/admin/kid-mode', { enabled: false });
      expect(off.status, off.text).toBe(200);
    }
    models.script({ text: '😊 Okay.' });
    await post(main.url, '/api/message', { content: 'and now for grown-ups', channel: 'deskbot' });
    expect(lastUserText()).not.toMatch(/child|kid mode/i);
  });

  it('another channel passes the text raw, with no sandwich (and no emoji rule in the prompt)', async () => {
    models.script({ text: '😊 Sure thing.' });
    const reply = await post(main.url, '/api/message', {
      content: 'summarise my inbox please',
      channel: 'telegram',
    });
    expect(reply.status, reply.text).toBe(200);
    expect(lastUserText()).toBe('summarise my inbox please');
  });

  it('a reply without an allowed leading emoji gets 😐 prepended; an allowed one is kept as is', async () => {
    models.script({ text: 'No emoji at all here.' });
    expect((await post(main.url, '/api/message', { content: 'hi', channel: 'deskbot' })).json).toEqual({
      response: '😐 No emoji at all here.',
    });

    models.script({ text: '😎 Cool shades on.' }); // a catalogue emoji, but not one of the nine
    expect((await post(main.url, '/api/message', { content: 'hi', channel: 'deskbot' })).json).toEqual({
      response: '😐 😎 Cool shades on.',
    });

    models.script({ text: '😴 So sleepy now.' });
    expect((await post(main.url, '/api/message', { content: 'hi', channel: 'deskbot' })).json).toEqual({
      response: '😴 So sleepy now.',
    });
  });

  it('a 9-sentence reply is cut to MAX_SENTENCES (6 by default)', async () => {
    const nine = Array.from({ length: 9 }, (_, i) => `This is sentence number ${i + 1}.`);
    models.script({ text: `😊 ${nine.join(' ')}` });
    const reply = await post(main.url, '/api/message', { content: 'talk a lot', channel: 'deskbot' });
    expect(reply.json).toEqual({ response: `😊 ${nine.slice(0, 6).join(' ')}` });
  });

  it('decimals such as 3.5 are not sentence ends (MAX_SENTENCES 6)', async () => {
    models.script({
      text: '😊 I have 2.5 cats. Pi is about 3.14 today! Is 0.5 a half? Four is here. Five is here. Six is here. Seven is cut.',
    });
    const reply = await post(main.url, '/api/message', { content: 'numbers', channel: 'deskbot' });
    expect(reply.json).toEqual({
      response:
        '😊 I have 2.5 cats. Pi is about 3.14 today! Is 0.5 a half? Four is here. Five is here. Six is here.',
    });
  });

  it('MAX_SENTENCES configured to 2: two sentences, decimals and "..." counted right', async () => {
    models.script({ text: '😊 It costs 3.5 dollars. That is cheap. Buy two of them.' });
    let reply = await post(two.url, '/api/message', { content: 'price?', channel: 'deskbot' });
    expect(reply.json).toEqual({ response: '😊 It costs 3.5 dollars. That is cheap.' });

    models.script({ text: '😊 Well... I think so. Maybe not. Who knows.' });
    reply = await post(two.url, '/api/message', { content: 'really?', channel: 'desk-bot' });
    expect(reply.json).toEqual({ response: '😊 Well... I think so.' });

    models.script({ text: 'One sentence. Two sentences. Three sentences.' });
    reply = await post(two.url, '/api/message', { content: 'count', channel: 'telegram' });
    expect(reply.json).toEqual({ response: '😐 One sentence. Two sentences.' });
  });

  it('the agent runtime down → HTTP 200 with the fallback reply, within the turn deadline (no hang)', async () => {
    const started = Date.now();
    const reply = await post(down.url, '/api/message', { content: 'hello?', channel: 'deskbot' });
    const elapsed = Date.now() - started;
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json).toEqual({ response: AGENT_FALLBACK_REPLY });
    expect(NINE.some((emoji) => reply.json.response.startsWith(emoji))).toBe(true);
    expect(elapsed, 'agent.turn_timeout is 2 s').toBeLessThan(12_000);
  }, 30_000);

  it('400 in the error shape for a missing or empty content / channel', async () => {
    for (const body of [
      { channel: 'deskbot' },
      { content: '   ', channel: 'deskbot' },
      { content: 'hi' },
      {},
    ]) {
      expectErrorShape(await post(main.url, '/api/message', body), 400);
    }
  });
});

// ---- /api/message/stream -------------------------------------------------------------------------------------

describe('/api/message/stream', () => {
  it('NDJSON: one chunk per sentence (the first with the emoji correction), then one final line', async () => {
    models.script({ text: 'First sentence is here. Second one follows! Is this the third?' });
    const { status, contentType, lines } = await streamLines(main.url, {
      content: 'stream to me',
      channel: 'deskbot',
    });
    expect(status).toBe(200);
    expect(contentType).toMatch(/ndjson/);
    expect(lines.map((l) => l.value)).toEqual([
      { type: 'chunk', content: '😐 First sentence is here.' },
      { type: 'chunk', content: 'Second one follows!' },
      { type: 'chunk', content: 'Is this the third?' },
      { type: 'final', content: '😐 First sentence is here. Second one follows! Is this the third?' },
    ]);
    expect(lastUserText()).toMatch(/English only/); // the stream route sandwiches the robot channel too
  });

  it('at most MAX_SENTENCES chunks; decimals do not split a chunk', async () => {
    const nine = Array.from({ length: 9 }, (_, i) => `Point ${i + 1}.5 is noted.`);
    models.script({ text: `😊 ${nine.join(' ')}` });
    const { lines } = await streamLines(main.url, { content: 'list', channel: 'deskbot' });
    const chunks = lines.filter((l) => l.value.type === 'chunk').map((l) => l.value.content);
    expect(chunks).toEqual([`😊 ${nine[0]}`, ...nine.slice(1, 6)]);
    expect(lines.at(-1)!.value).toEqual({ type: 'final', content: `😊 ${nine.slice(0, 6).join(' ')}` });
  });

  it('the first chunk arrives while the model is still streaming the rest', async () => {
    const first = '😊 The first sentence comes early.';
    const rest = ' Then a long tail of words arrives slowly, piece by piece, until the end.';
    const chunkChars = 4;
    const chunkDelayMs = 60;
    models.script({ text: first + rest, chunkChars, chunkDelayMs });
    const before = models.requests.length;
    const { lines } = await streamLines(main.url, { content: 'go slowly', channel: 'deskbot' });
    const modelRequest = models.requests.slice(before).find((r) => r.path.endsWith('/chat/completions'))!;
    // The fake sleeps chunkDelayMs after every piece, so it cannot have finished before this moment.
    const pieces = Math.ceil(Array.from(first + rest).length / chunkChars);
    const modelDoneNoEarlierThan = modelRequest.at + pieces * chunkDelayMs;
    const firstChunk = lines[0]!;
    expect(firstChunk.value).toEqual({ type: 'chunk', content: first });
    expect(firstChunk.at).toBeLessThan(modelDoneNoEarlierThan);
    expect(lines.at(-1)!.at - firstChunk.at).toBeGreaterThan(300);
    expect(lines.at(-1)!.value).toEqual({ type: 'final', content: `${first}${rest}` });
  });

  it('the agent runtime down → a fallback chunk, then the final line', async () => {
    const started = Date.now();
    const { status, lines } = await streamLines(down.url, { content: 'anyone home?', channel: 'deskbot' });
    expect(status).toBe(200);
    expect(lines.map((l) => l.value)).toEqual([
      { type: 'chunk', content: AGENT_FALLBACK_REPLY },
      { type: 'final', content: AGENT_FALLBACK_REPLY },
    ]);
    expect(Date.now() - started).toBeLessThan(12_000);
  }, 30_000);
});

// ---- /api/voice/escalate -------------------------------------------------------------------------------------

const NO_SESSION = Symbol('no session_id');
const escalate = (bridge: RunningBridge, tool: string, args: unknown, sessionId: unknown = 'sess-1') =>
  post(bridge.url, '/api/voice/escalate', {
    tool,
    args,
    ...(sessionId === NO_SESSION ? {} : { session_id: sessionId }),
  });

describe('/api/voice/escalate', () => {
  it('400 for an unknown tool, a missing session_id, or args that are not an object', async () => {
    expectErrorShape(await escalate(main, 'rm_rf', {}), 400);
    expectErrorShape(await escalate(main, 'take_photo', {}, NO_SESSION), 400);
    expectErrorShape(await escalate(main, 'take_photo', {}, 42), 400);
    for (const args of ['query', [1, 2], null, 7]) {
      expectErrorShape(await escalate(main, 'memory_lookup', args), 400);
    }
    expectErrorShape(await post(main.url, '/api/voice/escalate', { args: {}, session_id: 's' }), 400);
  });

  it('memory_lookup finds a fact posted to /api/voice/remember right after {ok:true}', async () => {
    const ok = await post(main.url, '/api/voice/remember', {
      fact: 'The user has a tortoise called Sheldon',
      session_id: 'sess-r',
    });
    expect(ok.json).toEqual({ ok: true });
    const found = await escalate(main, 'memory_lookup', { query: 'tortoise' });
    expect(found.status).toBe(200);
    expect(found.json.result).toContain('The user has a tortoise called Sheldon');
  });

  it('memory_lookup finds a turn posted to /api/voice/memory_log right after {ok:true}', async () => {
    const ok = await post(main.url, '/api/voice/memory_log', {
      user: 'I went kayaking on Lake Tahoe yesterday',
      assistant: '😊 That sounds wonderful!',
      session_id: 'sess-l',
    });
    expect(ok.json).toEqual({ ok: true });
    const found = await escalate(main, 'memory_lookup', { query: 'kayaking' });
    expect(found.json.result).toContain('Lake Tahoe');
  });

  it('memory_lookup finds a hand edit of workspace MEMORY.md', async () => {
    const before = await escalate(main, 'memory_lookup', { query: 'xylophone' });
    expect(before.json.result).not.toContain('xylophone lessons');
    appendFileSync(join(main.dataDir, 'workspace', 'MEMORY.md'), '- Grandma takes xylophone lessons\n');
    const after = await escalate(main, 'memory_lookup', { query: 'xylophone' });
    expect(after.json.result).toContain('Grandma takes xylophone lessons');
  });

  it('memory_lookup with nothing remembered says so instead of inventing', async () => {
    const reply = await escalate(main, 'memory_lookup', { query: 'quokka' });
    expect(reply.status).toBe(200);
    expect(reply.json.result).toMatch(/nothing/i);
    expect(reply.json.result).toContain('quokka');
  });

  it('the result is never longer than 1000 characters', async () => {
    for (let i = 0; i < 4; i++) {
      const fact = `Zebrafact ${i}: ${'the zebra stripes pattern is remarkable and '.repeat(20)}`.trim();
      expect((await post(main.url, '/api/voice/remember', { fact, session_id: 's' })).json).toEqual({
        ok: true,
      });
    }
    const reply = await escalate(main, 'memory_lookup', { query: 'zebra stripes' });
    expect(reply.status).toBe(200);
    expect(reply.json.result).toContain('zebra');
    expect(reply.json.result.length).toBeLessThanOrEqual(1000);
    expect(reply.json.result.length).toBeGreaterThan(900); // it was cut, not empty
  });

  it('take_photo with no cloud key → vision is unavailable; no photo taken, no invented description', async () => {
    const photos = voice.calls('take-photo');
    const reply = await escalate(main, 'take_photo', {});
    expect(reply.status).toBe(200);
    expect(reply.json.result).toMatch(/vision/i);
    expect(reply.json.result).toMatch(/unavailable/i);
    expect(reply.json.result).not.toMatch(/elephant/i);
    expect(voice.calls('take-photo')).toBe(photos);
  });

  it('take_photo with vision available describes the photo; kid mode on → denied, no photo taken', async () => {
    const normal = await escalate(vision, 'take_photo', {});
    expect(normal.json.result).toBe('A purple elephant is dancing.');
    const on = await post(vision.url, '/admin/kid-mode', { enabled: true });
    expect(on.status, on.text).toBe(200);
    try {
      const photos = voice.calls('take-photo');
      const denied = await escalate(vision, 'take_photo', {});
      expect(denied.status).toBe(200);
      expect(denied.json.result).toMatch(/kid mode/i);
      expect(denied.json.result).not.toMatch(/elephant/i);
      expect(voice.calls('take-photo')).toBe(photos);
    } finally {
      await post(vision.url, '/admin/kid-mode', { enabled: false });
    }
  });

  it('play_song with a voice server that answers queues the asset', async () => {
    const reply = await escalate(main, 'play_song', { name: 'happy birthday' });
    expect(reply.json.result).toMatch(/Playing "Happy Birthday"/);
    expect(voice.requests.at(-1)).toMatchObject({
      method: 'POST',
      path: '/device/admin/play-asset',
      body: { name: 'Happy Birthday' },
    });
  });

  it('play_song with the voice server unreachable → "(play_song unavailable)"', async () => {
    const started = Date.now();
    const reply = await escalate(down, 'play_song', { name: 'anything' });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ result: '(play_song unavailable)' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('play_song with a voice server that never answers → "(play_song took too long)" at about timeout_short', async () => {
    const started = Date.now();
    const reply = await escalate(upstream, 'play_song', { name: 'anything' });
    const elapsed = Date.now() - started;
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ result: '(play_song took too long)' });
    expect(elapsed).toBeGreaterThanOrEqual(500);
    expect(elapsed, 'timeout_short is 1 s').toBeLessThan(4000);
  });

  it('think_hard with no local router → a result saying it is unavailable', async () => {
    const reply = await escalate(main, 'think_hard', { question: 'Why is the sky blue?' });
    expect(reply.status).toBe(200);
    expect(reply.json.result).toMatch(/think_hard unavailable/);
  });

  it('think_hard with a local router → its answer, asked of local_router.think_model', async () => {
    router.responder = () => ({
      text: '<think>Rayleigh scattering, surely.</think>Sunlight scatters off the air.',
    });
    const before = router.chatRequests().length;
    const reply = await escalate(upstream, 'think_hard', { question: 'Why is the sky blue?' });
    expect(reply.json).toEqual({ result: 'Sunlight scatters off the air.' });
    const asked = router.chatRequests().slice(before);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.body.model).toBe('deep-thinker-test');
    expect(JSON.stringify(asked[0]!.body.messages)).toContain('Why is the sky blue?');
  });
});

// ---- memory side channel ---------------------------------------------------------------------------------------

describe('/api/voice/remember and /api/voice/memory_log', () => {
  it('400 on missing fields', async () => {
    for (const body of [
      { session_id: 's' },
      { fact: 'x' },
      { fact: '   ', session_id: 's' },
      { fact: 5, session_id: 's' },
    ]) {
      expectErrorShape(await post(main.url, '/api/voice/remember', body), 400);
    }
    for (const body of [
      { assistant: 'a', session_id: 's' },
      { user: 'u', session_id: 's' },
      { user: 'u', assistant: 'a' },
      {},
    ]) {
      expectErrorShape(await post(main.url, '/api/voice/memory_log', body), 400);
    }
  });

  it('{ok:true}, and the files are written under <data_dir>/workspace', async () => {
    const today = localDate(new Date());
    const fact = 'The user is allergic to peanuts';
    expect((await post(main.url, '/api/voice/remember', { fact, session_id: 'sess-f' })).json).toEqual({
      ok: true,
    });
    const memory = readFileSync(join(main.dataDir, 'workspace', 'MEMORY.md'), 'utf8');
    expect(memory).toContain(`- ${fact} (${today})\n`);

    const logged = await post(main.url, '/api/voice/memory_log', {
      user: 'What is a quasar?',
      assistant: '🤔 A very bright galaxy core.',
      session_id: 'sess-q',
    });
    expect(logged.json).toEqual({ ok: true });
    const logPath = join(main.dataDir, 'workspace', 'memory', `${today}.md`);
    expect(existsSync(logPath)).toBe(true);
    const log = readFileSync(logPath, 'utf8');
    expect(log).toContain('**User:** What is a quasar?');
    expect(log).toContain('**Robot:** 🤔 A very bright galaxy core.');
    expect(log).toContain('session sess-q');
  });
});

// ---- every POST route: malformed and oversized bodies -------------------------------------------------------

const POST_ROUTES = [
  '/api/message',
  '/api/message/stream',
  '/api/voice/escalate',
  '/api/voice/remember',
  '/api/voice/memory_log',
  '/v1/chat/completions',
  '/admin/kid-mode',
  '/admin/smart-mode',
  '/admin/persona',
  '/admin/model',
  '/admin/safety',
  '/admin/state',
];

describe('every POST route', () => {
  it.each(POST_ROUTES)('%s: malformed JSON → 400 malformed_json in the error shape', async (route) => {
    for (const body of ['{"content": ', '{bad json}', "{'single': 'quotes'}"]) {
      expectErrorShape(await post(main.url, route, body), 400, 'malformed_json');
    }
  });

  it.each(POST_ROUTES)('%s: a 2 MB body → 413 body_too_large in the error shape', async (route) => {
    const huge = JSON.stringify({ content: 'x'.repeat(2 * 1024 * 1024), channel: 'deskbot', fact: 'y' });
    expectErrorShape(await post(main.url, route, huge), 413, 'body_too_large');
  });

  it('the bridge still answers after all of that', async () => {
    expect((await request(main.url, 'GET', '/health')).json).toEqual({ ok: true });
  });
});

// ---- /health -------------------------------------------------------------------------------------------------

describe('/health', () => {
  it('200 {ok:true} with the agent up', async () => {
    const reply = await request(main.url, 'GET', '/health');
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ ok: true });
  });

  it('503 in the error shape with a broken agent command', async () => {
    expectErrorShape(await request(down.url, 'GET', '/health'), 503);
  });
});

// ---- /v1 pass-through --------------------------------------------------------------------------------------

describe('/v1 pass-through to the local router', () => {
  it('no local_router.url → 503 naming LOCAL_ROUTER_URL, on both routes', async () => {
    const models = await request(main.url, 'GET', '/v1/models');
    expectErrorShape(models, 503);
    expect(models.json.error.message).toContain('LOCAL_ROUTER_URL');
    const chat = await post(main.url, '/v1/chat/completions', {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expectErrorShape(chat, 503);
    expect(chat.json.error.message).toContain('LOCAL_ROUTER_URL');
  });

  it('/v1/models passes through', async () => {
    const direct = await request(router.url.replace(/\/v1$/, ''), 'GET', '/v1/models');
    const before = router.requests.length;
    const reply = await request(upstream.url, 'GET', '/v1/models');
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual(direct.json);
    expect(reply.json.data[0].id).toBe('fake-model');
    expect(router.requests.slice(before).map((r) => r.path)).toEqual(['/v1/models']);
  });

  it('a non-streaming chat completion passes through with its JSON unchanged', async () => {
    router.responder = () => ({ text: '😊 Plain answer.' });
    const before = router.requests.length;
    const body = { model: 'local-small', messages: [{ role: 'user', content: 'plain please' }] };
    const reply = await post(upstream.url, '/v1/chat/completions', body);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json.choices[0].message.content).toBe('😊 Plain answer.');
    expect(router.requests.slice(before).map((r) => r.body)).toEqual([body]);
  });

  it('a streaming chat completion arrives as SSE through the bridge unchanged (and not buffered)', async () => {
    const text = '😊 Streaming through the bridge works, one small piece at a time.';
    const script = { text, chunkChars: 5, chunkDelayMs: 40 };
    const body = {
      model: 'local-small',
      stream: true,
      messages: [{ role: 'user', content: 'stream please' }],
    };
    router.responder = () => ({ ...script });
    const direct = await fetch(`${router.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const expected = await direct.text();

    const before = router.requests.length;
    const response = await fetch(`${upstream.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-local-test' },
      body: JSON.stringify(body),
    });
    expect(response.status, response.status === 200 ? '' : await response.clone().text()).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const arrivals: number[] = [];
    let received = '';
    const decoder = new TextDecoder();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      arrivals.push(Date.now());
      received += decoder.decode(chunk, { stream: true });
    }
    expect(received).toBe(expected);
    expect(received).toContain('data: [DONE]');
    const forwarded = router.requests.slice(before);
    expect(forwarded).toHaveLength(1);
    expect(forwarded[0]!.path).toBe('/v1/chat/completions');
    expect(forwarded[0]!.body).toEqual(body);
    expect(forwarded[0]!.headers.authorization).toBe('Bearer sk-local-test');
    // 14 pieces 40 ms apart: a buffering proxy would deliver everything at once.
    expect(arrivals.length).toBeGreaterThan(2);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThan(150);
  });
});
