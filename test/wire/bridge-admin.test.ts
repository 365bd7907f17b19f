// The bridge's admin routes (SPEC "Bridge admin routes", "Authentication", "Errors"; DESIGN §2/§3): the loopback
// rule on a fastify app with the real admin routes (peer addresses set through inject), then every route through
// a real bridge over HTTP on 127.0.0.1 with the REAL embedded agent as its child (its model a scripted
// OpenAI-compatible server).
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/agent/memory.js';
import { PERSONA_FILES, seedWorkspace } from '../../src/agent/workspace.js';
import { AllowList, DEFAULT_ALLOWED_TOOLS } from '../../src/bridge/allow-list.js';
import { createControls } from '../../src/bridge/controls.js';
import { registerAdminRoutes } from '../../src/bridge/routes-admin.js';
import { TogglesStore } from '../../src/bridge/toggles-store.js';
import { VoiceClient } from '../../src/bridge/voice-client.js';
import { createHttpApp } from '../../src/util/http-app.js';
import { silentLogger } from '../../src/util/log.js';
import {
  DEAD_AGENT,
  EMBEDDED_AGENT,
  type RunningBridge,
  TestBridges,
  TSX_LOADER,
} from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import {
  eventuallyOk,
  expectErrorShape,
  healthy,
  parseOrUndefined,
  post,
  type Reply,
  request,
} from '../support/http.js';
import { freePort } from '../support/net.js';

// ---- helpers -------------------------------------------------------------------------------------------------

const ATOMIC_FILE = fileURLToPath(new URL('../../src/util/atomic-file.ts', import.meta.url));

const bridges = new TestBridges('deskbot-bridge-admin-');
const tempDir = () => bridges.tempDir();
const bridgeWith = (...args: Parameters<TestBridges['start']>) => bridges.start(...args);
const stop = (running: RunningBridge) => bridges.stop(running);

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
const bytesOf = (path: string) => (existsSync(path) ? readFileSync(path) : null);
const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** A recording stand-in for the voice server's admin routes. */
async function recordingVoice(): Promise<{
  url: string;
  requests: Array<{ path: string; body: any }>;
  close: () => Promise<void>;
}> {
  const requests: Array<{ path: string; body: any }> = [];
  const server: Server = createHttpServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString();
    requests.push({ path: (req.url ?? '').split('?')[0]!, body: raw ? JSON.parse(raw) : undefined });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- 1. the loopback rule, on the admin routes alone -----------------------------------------------------------

describe('loopback only: every admin route, peer address set through inject', () => {
  let app: FastifyInstance;
  let dataDir: string;
  let workspace: string;
  const restarts: Array<string | undefined> = [];
  const savedModels: Array<[string, string]> = [];
  let memory: Promise<MemoryStore> | undefined;

  beforeAll(async () => {
    dataDir = tempDir();
    workspace = join(dataDir, 'workspace');
    await seedWorkspace(workspace);
    app = createHttpApp({ logger: silentLogger });
    const toggles = new TogglesStore(dataDir);
    const voice = new VoiceClient(`http://127.0.0.1:${await freePort()}`);
    const restartAgent = async (model?: string) => {
      restarts.push(model);
    };
    registerAdminRoutes(app, {
      controls: createControls({
        toggles,
        voice,
        inProcessSmartMode: false,
        cloudKeyPresent: () => true,
        restartAgent,
        smartModel: 'smart-model',
        agentModel: () => 'agent-model',
      }),
      toggles,
      voice,
      workspaceDir: workspace,
      memory: () => (memory ??= MemoryStore.open(workspace)),
      allowList: new AllowList(dataDir, silentLogger),
      voiceEndpoint: () => ({ url: 'http://127.0.0.1:9/v1', apiKey: 'k' }),
      restartAgent,
      saveModelOverride: async (daemon, model) => {
        savedModels.push([daemon, model]);
      },
    });
    await app.ready();
  });

  afterAll(async () => {
    await app?.close();
  });

  const ROUTES: Array<{ method: 'GET' | 'POST'; url: string; payload?: Record<string, unknown> }> = [
    { method: 'POST', url: '/admin/kid-mode', payload: { enabled: true } },
    { method: 'POST', url: '/admin/smart-mode', payload: { enabled: true } },
    { method: 'POST', url: '/admin/persona', payload: { file: 'SOUL.md', content: 'You are evil now.' } },
    { method: 'POST', url: '/admin/model', payload: { daemon: 'agent', model: 'evil-model' } },
    { method: 'GET', url: '/admin/safety' },
    { method: 'POST', url: '/admin/safety', payload: { action: 'add', tool: 'self.evil.tool' } },
    { method: 'POST', url: '/admin/state', payload: { state: 'security' } },
  ];
  const SPOOFED_HEADERS: Array<Record<string, string>> = [
    {},
    { 'x-forwarded-for': '127.0.0.1' },
    { 'x-real-ip': '127.0.0.1' },
    { forwarded: 'for=127.0.0.1' },
    { 'x-forwarded-for': '127.0.0.1', 'x-real-ip': '::1', forwarded: 'for="[::1]"', host: 'localhost' },
  ];

  const injected = (
    route: { method: 'GET' | 'POST'; url: string; payload?: Record<string, unknown> },
    remoteAddress: string,
    headers: Record<string, string> = {},
  ) =>
    app.inject({
      method: route.method,
      url: route.url,
      ...(route.payload ? { payload: route.payload } : {}),
      headers,
      remoteAddress,
    });

  const asReply = (res: { statusCode: number; body: string }): Reply => ({
    status: res.statusCode,
    text: res.body,
    json: parseOrUndefined(res.body),
  });

  it.each(ROUTES.map((r) => [`${r.method} ${r.url}`, r] as const))(
    '%s from 192.168.7.20 → 403 forbidden, also with X-Forwarded-For / X-Real-IP / Forwarded saying 127.0.0.1',
    async (_name, route) => {
      for (const headers of SPOOFED_HEADERS) {
        expectErrorShape(asReply(await injected(route, '192.168.7.20', headers)), 403, 'forbidden');
      }
    },
  );

  it('other non-loopback peers are refused too (LAN, IPv4-mapped LAN, IPv6, look-alikes)', async () => {
    for (const peer of ['10.0.0.5', '::ffff:192.168.7.20', '128.0.0.1', '::2', 'fe80::1', '1.127.0.0']) {
      for (const route of ROUTES) {
        expectErrorShape(asReply(await injected(route, peer)), 403, 'forbidden');
      }
    }
  });

  it('a refused caller is refused before its body is read: a malformed body still gets 403', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/admin/kid-mode',
      payload: '{not json',
      headers: { 'content-type': 'application/json' },
      remoteAddress: '192.168.7.20',
    });
    expectErrorShape(asReply(res), 403, 'forbidden');
  });

  it('refused calls had no effect at all', () => {
    expect(existsSync(join(dataDir, 'state', 'toggles.json'))).toBe(false);
    expect(existsSync(join(dataDir, 'state', 'mcp-allowlist.json'))).toBe(false);
    expect(readFileSync(join(workspace, 'SOUL.md'), 'utf8')).not.toContain('evil');
    expect(restarts).toEqual([]);
    expect(savedModels).toEqual([]);
  });

  it('SPEC: any non-localhost caller of /admin/* gets 403, also for a path or method with no route', async () => {
    for (const route of [
      { method: 'GET' as const, url: '/admin/does-not-exist' },
      { method: 'POST' as const, url: '/admin/reboot', payload: {} },
      { method: 'GET' as const, url: '/admin/kid-mode' },
    ]) {
      expectErrorShape(asReply(await injected(route, '192.168.7.20')), 403, 'forbidden');
    }
  });

  it.each(['127.0.0.1', '127.5.6.7', '::1', '::ffff:127.0.0.1'])('peer %s is allowed', async (peer) => {
    const list = asReply(await injected({ method: 'GET', url: '/admin/safety' }, peer));
    expect(list.status, list.text).toBe(200);
    expect(list.json.tools).toEqual([...DEFAULT_ALLOWED_TOOLS].sort());
    const kid = asReply(
      await injected({ method: 'POST', url: '/admin/kid-mode', payload: { enabled: peer !== '::1' } }, peer),
    );
    expect(kid.status, kid.text).toBe(200);
    expect(kid.json.toggles.kid_mode).toBe(peer !== '::1');
    expect(readJson(join(dataDir, 'state', 'toggles.json')).kid_mode).toBe(peer !== '::1');
  });
});

// ---- 2. through the real bridge over HTTP ------------------------------------------------------------------

let models: FakeOpenAi;
/** Embedded agent; cloud key set; voice server unreachable; agent.model / smart_model named for assertions. */
let admin: RunningBridge;
/** Agent down; no cloud key. */
let keyless: RunningBridge;
const AGENT_CONFIG = {
  cloud: { api_key: 'test-cloud-key' },
  agent: { model: 'base-model-test' },
  LLM: { TwoTier: { smart_model: 'smart-model-test' } },
};

const lastAgentRequest = () => models.chatRequests().at(-1)!;

/** Sends a robot-channel message and returns the model request the agent made for it. */
async function agentTurn(running: RunningBridge, words: string): Promise<any> {
  await healthy(running.url, 30_000);
  const before = models.chatRequests().length;
  const reply = await post(running.url, '/api/message', { content: words, channel: 'deskbot' });
  expect(reply.status, reply.text).toBe(200);
  expect(models.chatRequests().length, `no model request for: ${reply.text}`).toBeGreaterThan(before);
  return lastAgentRequest().body;
}

beforeAll(async () => {
  models = await new FakeOpenAi().start();
  models.responder = () => ({ text: '😊 Okay.' });
  [admin, keyless] = await Promise.all([
    bridgeWith(AGENT_CONFIG, EMBEDDED_AGENT, { AGENT_MODEL_URL: models.url }),
    bridgeWith({}, DEAD_AGENT),
  ]);
  await healthy(admin.url, 30_000);
}, 60_000);

afterAll(async () => {
  await bridges.closeAll();
  await models?.close();
}, 30_000);

describe('/admin/kid-mode', () => {
  it('persists <data_dir>/state/toggles.json; voice server unreachable → persisted anyway, pip not pushed', async () => {
    const reply = await post(admin.url, '/admin/kid-mode', { enabled: true });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json).toMatchObject({
      ok: true,
      toggles: { kid_mode: true, smart_mode: false },
      pushed: false,
    });
    expect(reply.json.push_error).toEqual(expect.any(String));
    expect(readJson(admin.state('toggles.json'))).toEqual({ kid_mode: true, smart_mode: false });
    expect(admin.bridge.toggles.get()).toEqual({ kid_mode: true, smart_mode: false });
    // Hot-reloaded: the very next robot-channel turn carries the kid sandwich.
    expect((await agentTurn(admin, 'hello kid')).messages.at(-1).content).toMatch(/child/i);

    const off = await post(admin.url, '/admin/kid-mode', { enabled: false });
    expect(off.json.toggles).toEqual({ kid_mode: false, smart_mode: false });
    expect(readJson(admin.state('toggles.json'))).toEqual({ kid_mode: false, smart_mode: false });
    expect((await agentTurn(admin, 'hello adult')).messages.at(-1).content).not.toMatch(/child/i);
  });

  it('atomic: a reader never sees a partial file while many changes are written; no temp files stay', async () => {
    const path = admin.state('toggles.json');
    let reads = 0;
    const bad: string[] = [];
    let writing = true;
    const reader = (async () => {
      while (writing) {
        const text = readFileSync(path, 'utf8');
        reads++;
        try {
          const value = JSON.parse(text);
          if (typeof value.kid_mode !== 'boolean' || typeof value.smart_mode !== 'boolean') bad.push(text);
        } catch {
          bad.push(text);
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    for (let round = 0; round < 5; round++) {
      const replies = await Promise.all(
        Array.from({ length: 8 }, (_, i) => post(admin.url, '/admin/kid-mode', { enabled: i % 2 === 0 })),
      );
      for (const reply of replies) expect(reply.status, reply.text).toBe(200);
    }
    const last = await post(admin.url, '/admin/kid-mode', { enabled: false });
    writing = false;
    await reader;
    expect(bad).toEqual([]);
    expect(reads).toBeGreaterThan(10);
    expect(last.json.toggles.kid_mode).toBe(false);
    expect(readJson(path)).toEqual(admin.bridge.toggles.get());
    expect(readdirSync(join(admin.dataDir, 'state')).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('400 for a non-boolean, and nothing changes', async () => {
    const before = bytesOf(admin.state('toggles.json'));
    for (const body of [{ enabled: 'true' }, { enabled: 1 }, { enabled: null }, {}, { enabled: [true] }]) {
      expectErrorShape(await post(admin.url, '/admin/kid-mode', body), 400);
      expectErrorShape(await post(admin.url, '/admin/smart-mode', body), 400);
    }
    expect(bytesOf(admin.state('toggles.json'))).toEqual(before);
  });
});

describe('/admin/smart-mode', () => {
  it('no cloud key → 409 no_cloud_key and the toggles file is unchanged', async () => {
    expect((await post(keyless.url, '/admin/kid-mode', { enabled: true })).status).toBe(200);
    const before = bytesOf(keyless.state('toggles.json'));
    expect(before).not.toBeNull();
    const reply = await post(keyless.url, '/admin/smart-mode', { enabled: true });
    expectErrorShape(reply, 409, 'no_cloud_key');
    expect(bytesOf(keyless.state('toggles.json'))).toEqual(before);
    expect(keyless.bridge.toggles.get()).toEqual({ kid_mode: true, smart_mode: false });
    // Turning it off needs no key.
    expect((await post(keyless.url, '/admin/smart-mode', { enabled: false })).status).toBe(200);
  });

  it('kid mode and smart mode compose freely: all four combinations persist, and the agent follows', async () => {
    const combos: Array<[boolean, boolean]> = [
      [true, false],
      [true, true],
      [false, true],
      [false, false],
    ];
    for (const [kid, smart] of combos) {
      const k = await post(admin.url, '/admin/kid-mode', { enabled: kid });
      expect(k.status, k.text).toBe(200);
      const s = await post(admin.url, '/admin/smart-mode', { enabled: smart });
      expect(s.status, s.text).toBe(200);
      const expected = { kid_mode: kid, smart_mode: smart };
      expect(s.json.toggles).toEqual(expected);
      expect(readJson(admin.state('toggles.json'))).toEqual(expected);
      expect(admin.bridge.toggles.get()).toEqual(expected);

      const body = await agentTurn(admin, `combo kid=${kid} smart=${smart}`);
      // Agent mode (VOICE_PROVIDER=agent): smart mode restarts the runtime on the smart model.
      expect(body.model).toBe(smart ? 'smart-model-test' : 'base-model-test');
      const sent = body.messages.at(-1).content as string;
      if (kid) expect(sent).toMatch(/child/i);
      else expect(sent).not.toMatch(/child/i);
    }
  }, 90_000);
});

describe('/admin/model', () => {
  it('daemon agent: the runtime restarts on the new model, and state/models.json records it', async () => {
    const before = admin.bridge.agent();
    await healthy(admin.url, 30_000);
    const reply = await post(admin.url, '/admin/model', { daemon: 'agent', model: 'model-x-test' });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json).toEqual({ ok: true, daemon: 'agent', model: 'model-x-test' });
    const after = admin.bridge.agent();
    expect(after).not.toBe(before);
    await expect(before.prompt('c', 'hello')).rejects.toThrow(/closed/);
    expect(readJson(admin.state('models.json'))).toEqual({ agent: 'model-x-test' });
    expect((await agentTurn(admin, 'which model are you')).model).toBe('model-x-test');
    expect(after.stats.spawns).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('turning smart mode on and off again returns the agent to the model set through /admin/model', async () => {
    expect((await post(admin.url, '/admin/smart-mode', { enabled: true })).status).toBe(200);
    expect((await agentTurn(admin, 'smart now')).model).toBe('smart-model-test');
    expect((await post(admin.url, '/admin/smart-mode', { enabled: false })).status).toBe(200);
    // models.json says the agent's default model is model-x-test; smart mode off must go back to it.
    expect(readJson(admin.state('models.json')).agent).toBe('model-x-test');
    expect((await agentTurn(admin, 'not smart any more')).model).toBe('model-x-test');
  }, 60_000);

  it('daemon voice with the voice server unreachable → 502/503 in the error shape', async () => {
    const reply = await post(admin.url, '/admin/model', { daemon: 'voice', model: 'tiny-model' });
    expectErrorShape(reply, (status) => status === 502 || status === 503);
  });

  it('a bad daemon, or a missing model → 400, and models.json is unchanged', async () => {
    const before = bytesOf(admin.state('models.json'));
    for (const body of [
      { daemon: 'llm', model: 'm' },
      { daemon: 'AGENT', model: 'm' },
      { daemon: '', model: 'm' },
      { model: 'm' },
      { daemon: 'agent' },
      { daemon: 'agent', model: '   ' },
      { daemon: 'agent', model: 7 },
    ]) {
      expectErrorShape(await post(admin.url, '/admin/model', body), 400);
    }
    expect(bytesOf(admin.state('models.json'))).toEqual(before);
  });
});

describe('/admin/persona', () => {
  it.each([...PERSONA_FILES])('%s is writable and the file holds exactly the content', async (file) => {
    const content = `# ${file}\n\nWritten by the admin test: ünïcödé ✓ 😊\n- line two\n`;
    const reply = await post(admin.url, '/admin/persona', { file, content });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json).toMatchObject({ ok: true, file });
    expect(readFileSync(join(admin.workspace, file), 'utf8')).toBe(content);
  });

  it('any other name → 400, nothing is written anywhere (names are case-sensitive: soul.md is refused)', async () => {
    const soul = readFileSync(join(admin.workspace, 'SOUL.md'), 'utf8');
    const names = [
      '../x',
      'SOUL.md/../../etc',
      '../../etc/passwd',
      '/etc/passwd',
      'notes.md',
      '',
      'soul.md',
      'Soul.md',
      'memory/2024-01-01.md',
      ' SOUL.md',
      'SOUL.md ',
      '.SOUL.md',
      'SOUL.md\u0000',
      './SOUL.md',
    ];
    for (const file of names) {
      expectErrorShape(await post(admin.url, '/admin/persona', { file, content: 'pwned' }), 400);
    }
    expectErrorShape(await post(admin.url, '/admin/persona', { file: 42, content: 'pwned' }), 400);
    expectErrorShape(await post(admin.url, '/admin/persona', { file: 'SOUL.md' }), 400);
    expect(readFileSync(join(admin.workspace, 'SOUL.md'), 'utf8')).toBe(soul);
    for (const path of [
      join(admin.dataDir, 'x'),
      join(admin.workspace, 'x'),
      join(admin.workspace, 'notes.md'),
      join(admin.workspace, 'soul.md'),
      join(admin.workspace, 'Soul.md'),
      join(admin.workspace, 'memory', '2024-01-01.md'),
    ]) {
      expect(existsSync(path), path).toBe(false);
    }
  });

  it('content over 256 KB is refused in the error shape (400, or 413 from the body limit) and nothing changes', async () => {
    const soul = readFileSync(join(admin.workspace, 'SOUL.md'), 'utf8');
    for (const size of [256 * 1024 + 1, 300 * 1024, 1024 * 1024]) {
      const reply = await post(admin.url, '/admin/persona', { file: 'SOUL.md', content: 'y'.repeat(size) });
      expectErrorShape(reply, (status) => status === 400 || status === 413);
    }
    expect(readFileSync(join(admin.workspace, 'SOUL.md'), 'utf8')).toBe(soul);
    // Just under the limit is fine.
    const big = `# Soul\n${'z'.repeat(200 * 1024)}\n`;
    expect((await post(admin.url, '/admin/persona', { file: 'SOUL.md', content: big })).status).toBe(200);
    expect(readFileSync(join(admin.workspace, 'SOUL.md'), 'utf8')).toBe(big);
  });

  it('writing MEMORY.md makes its facts findable by memory_lookup (and dropped facts are gone)', async () => {
    const lookup = async (query: string) =>
      (
        await post(admin.url, '/api/voice/escalate', {
          tool: 'memory_lookup',
          args: { query },
          session_id: 's',
        })
      ).json.result as string;
    expect(
      (await post(admin.url, '/api/voice/remember', { fact: 'The user owns a flamingo', session_id: 's' }))
        .json,
    ).toEqual({ ok: true });
    expect(await lookup('flamingo')).toContain('The user owns a flamingo');
    const reply = await post(admin.url, '/admin/persona', {
      file: 'MEMORY.md',
      content: '# Memory\n\n- The owner plays the cello on Sundays (2024-05-01)\n',
    });
    expect(reply.status, reply.text).toBe(200);
    expect(await lookup('cello')).toContain('The owner plays the cello on Sundays');
    expect(await lookup('flamingo')).not.toContain('The user owns a flamingo');
  });
});

describe('interrupted persona write (SIGKILL during writeFileAtomic of 30 MB)', () => {
  it('after every kill the file holds exactly the old or a complete new content; temp files are never content', async () => {
    const target = join(admin.workspace, 'MEMORY.md');
    const OLD = '# Memory\n\n- The secret animal is an oldowlgamma (2024-01-01)\n';
    expect((await post(admin.url, '/admin/persona', { file: 'MEMORY.md', content: OLD })).status).toBe(200);
    const fact = (animal: string) => `The secret animal is an ${animal}`;
    const filler = 'x'.repeat(30 * 1024 * 1024);
    const versions = new Map<string, string>([
      [sha(OLD), 'oldowlgamma'],
      [sha(`# Memory\n\n- ${fact('aardvarkalpha')} (2024-02-02)\n<!-- ${filler} -->\n`), 'aardvarkalpha'],
      [sha(`# Memory\n\n- ${fact('bumblebeebeta')} (2024-03-03)\n<!-- ${filler} -->\n`), 'bumblebeebeta'],
    ]);

    const scriptDir = tempDir();
    const script = join(scriptDir, 'writer.mjs');
    writeFileSync(
      script,
      `import { writeFileAtomic } from ${JSON.stringify(pathToFileURL(ATOMIC_FILE).href)};
const target = process.argv[2];
const filler = 'x'.repeat(30 * 1024 * 1024);
const body = (animal, date) => '# Memory\\n\\n- The secret animal is an ' + animal + ' (' + date + ')\\n<!-- ' + filler + ' -->\\n';
const contents = [body('aardvarkalpha', '2024-02-02'), body('bumblebeebeta', '2024-03-03')];
for (let i = 0; ; i++) {
  process.stdout.write('w' + i + '\\n');
  await writeFileAtomic(target, contents[i % 2]);
}
`,
    );

    const lookup = async (query: string) =>
      (
        await post(admin.url, '/api/voice/escalate', {
          tool: 'memory_lookup',
          args: { query },
          session_id: 's',
        })
      ).json.result as string;

    const seen: string[] = [];
    for (let round = 0; round < 5; round++) {
      const child: ChildProcess = spawn(process.execPath, ['--import', TSX_LOADER, script, target], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout!.on('data', (data) => {
        out += data;
      });
      child.stderr!.on('data', (data) => {
        err += data;
      });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      try {
        await eventuallyOk(async () => out.includes('w0') || child.exitCode !== null, 20_000);
        expect(child.exitCode, err).toBeNull();
        await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 1500)));
      } finally {
        child.kill('SIGKILL');
        await exited;
      }
      const content = readFileSync(target);
      const version = versions.get(sha(content));
      expect(
        version,
        `round ${round}: ${content.length} bytes that are neither the old nor a new content`,
      ).toBeDefined();
      seen.push(`${version}@${out.trim().split('\n').at(-1)}`);
      // The bridge reads the real file only: stray temp files (left by the kill) are never content.
      for (const animal of versions.values()) {
        const result = await lookup(animal);
        if (animal === version) expect(result).toContain(fact(animal));
        else expect(result).not.toContain(fact(animal));
      }
    }
    // The route still writes over whatever the kills left behind.
    const small = '# Memory\n\n- The secret animal is a calmcatdelta (2024-04-04)\n';
    expect((await post(admin.url, '/admin/persona', { file: 'MEMORY.md', content: small })).status).toBe(200);
    expect(readFileSync(target, 'utf8')).toBe(small);
    expect(await lookup('calmcatdelta')).toContain('The secret animal is a calmcatdelta');
    expect(seen).toHaveLength(5);
  }, 180_000);
});

describe('/admin/safety', () => {
  const tools = async () => {
    const reply = await request(admin.url, 'GET', '/admin/safety');
    expect(reply.status, reply.text).toBe(200);
    return reply.json.tools as string[];
  };

  it('GET lists the default allow-list', async () => {
    expect(await tools()).toEqual([...DEFAULT_ALLOWED_TOOLS].sort());
  });

  it('add a valid dotted tool → listed and persisted in state/mcp-allowlist.json', async () => {
    const reply = await post(admin.url, '/admin/safety', { action: 'add', tool: 'self.camera.take_photo' });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json.tools).toContain('self.camera.take_photo');
    expect(await tools()).toEqual([...DEFAULT_ALLOWED_TOOLS, 'self.camera.take_photo'].sort());
    expect(readJson(admin.state('mcp-allowlist.json'))).toEqual({
      tools: [...DEFAULT_ALLOWED_TOOLS, 'self.camera.take_photo'].sort(),
    });
  });

  it('add "rm -rf" or "notdotted" (or other junk) → 400 and nothing changes', async () => {
    const list = await tools();
    const file = bytesOf(admin.state('mcp-allowlist.json'));
    for (const tool of [
      'rm -rf',
      'notdotted',
      'rm -rf /',
      'Self.Robot.X',
      'self.',
      '.self.x',
      'self..x',
      '',
      'self.x;ls',
    ]) {
      expectErrorShape(await post(admin.url, '/admin/safety', { action: 'add', tool }), 400);
    }
    for (const body of [{ action: 'drop', tool: 'self.a.b' }, { action: 'add' }, { tool: 'self.a.b' }]) {
      expectErrorShape(await post(admin.url, '/admin/safety', body), 400);
    }
    expect(await tools()).toEqual(list);
    expect(bytesOf(admin.state('mcp-allowlist.json'))).toEqual(file);
  });

  it('remove a tool not in the list → 404; remove a listed one → gone and persisted', async () => {
    const file = bytesOf(admin.state('mcp-allowlist.json'));
    expectErrorShape(
      await post(admin.url, '/admin/safety', { action: 'remove', tool: 'self.not.there' }),
      404,
    );
    expect(bytesOf(admin.state('mcp-allowlist.json'))).toEqual(file);
    const reply = await post(admin.url, '/admin/safety', {
      action: 'remove',
      tool: 'self.camera.take_photo',
    });
    expect(reply.status, reply.text).toBe(200);
    expect(await tools()).toEqual([...DEFAULT_ALLOWED_TOOLS].sort());
    expect(readJson(admin.state('mcp-allowlist.json')).tools).not.toContain('self.camera.take_photo');
  });

  it('a hand-written invalid allow-list is ignored (the last good list stays); a valid hand edit is hot-reloaded', async () => {
    const path = admin.state('mcp-allowlist.json');
    const good = await tools();
    let stamp = Date.now() / 1000 + 10;
    const handWrite = (text: string) => {
      writeFileSync(path, text);
      utimesSync(path, stamp, stamp); // a distinct mtime, so the change is seen whatever the clock's grain
      stamp += 10;
    };
    for (const text of [
      '{"tools": ["rm -rf /"]}',
      'this is not json',
      '{"tools": "self.robot.set_head_angles"}',
      '{"tools": [1, 2]}',
      '',
    ]) {
      handWrite(text);
      expect(await tools(), text).toEqual(good);
    }
    handWrite('{"tools": ["self.robot.set_state", "self.get_device_status", "self.robot.set_state"]}');
    expect(await tools()).toEqual(['self.get_device_status', 'self.robot.set_state']);
    // And the route builds on the hand-edited list.
    const reply = await post(admin.url, '/admin/safety', { action: 'add', tool: 'self.robot.set_toggle' });
    expect(reply.json.tools).toEqual([
      'self.get_device_status',
      'self.robot.set_state',
      'self.robot.set_toggle',
    ]);
  });
});

describe('/admin/state', () => {
  it('400 for a state outside the six', async () => {
    for (const body of [{ state: 'flying' }, { state: 'IDLE' }, { state: '' }, { state: 3 }, {}]) {
      expectErrorShape(await post(admin.url, '/admin/state', body), 400);
    }
  });

  it('voice server unreachable → a 5xx in the error shape', async () => {
    for (const state of ['idle', 'talk', 'story_time', 'security', 'sleep', 'dance']) {
      expectErrorShape(
        await post(admin.url, '/admin/state', { state }),
        (status) => status >= 500 && status < 600,
      );
    }
  });

  it('with a voice server that answers: the state (and device_id) reach set-state; the pips reach set-toggle', async () => {
    const voice = await recordingVoice();
    const running = await bridgeWith({ bridge: { voice_url: voice.url }, ...AGENT_CONFIG }, DEAD_AGENT);
    try {
      const reply = await post(running.url, '/admin/state', {
        state: 'dance',
        device_id: 'aa:bb:cc:dd:ee:ff',
      });
      expect(reply.status, reply.text).toBe(200);
      expect(voice.requests).toContainEqual({
        path: '/device/admin/set-state',
        body: { state: 'dance', device_id: 'aa:bb:cc:dd:ee:ff' },
      });
      const kid = await post(running.url, '/admin/kid-mode', { enabled: true });
      expect(kid.json).toMatchObject({ ok: true, pushed: true });
      expect(voice.requests.at(-1)).toEqual({
        path: '/device/admin/set-toggle',
        body: { name: 'kid_mode', enabled: true },
      });
    } finally {
      await stop(running);
      await voice.close();
    }
  });
});

describe('toggles across a bridge restart, and concurrent changes', () => {
  it('stop + start on the same data_dir: the toggles are read back', async () => {
    const first = await bridgeWith(AGENT_CONFIG, DEAD_AGENT);
    expect((await post(first.url, '/admin/kid-mode', { enabled: true })).status).toBe(200);
    expect((await post(first.url, '/admin/smart-mode', { enabled: true })).status).toBe(200);
    await stop(first);
    const second = await bridgeWith(AGENT_CONFIG, DEAD_AGENT, {}, first.dataDir);
    try {
      expect(second.bridge.toggles.get()).toEqual({ kid_mode: true, smart_mode: true });
      expect((await post(second.url, '/admin/kid-mode', { enabled: false })).json.toggles).toEqual({
        kid_mode: false,
        smart_mode: true,
      });
    } finally {
      await stop(second);
    }
    const third = await bridgeWith(AGENT_CONFIG, DEAD_AGENT, {}, first.dataDir);
    try {
      expect(third.bridge.toggles.get()).toEqual({ kid_mode: false, smart_mode: true });
    } finally {
      await stop(third);
    }
  });

  it('the admin bridge restarted on its data_dir keeps the agent model override and the toggles', async () => {
    const toggles = admin.bridge.toggles.get();
    await stop(admin);
    admin = await bridgeWith(AGENT_CONFIG, EMBEDDED_AGENT, { AGENT_MODEL_URL: models.url }, admin.dataDir);
    expect(admin.bridge.toggles.get()).toEqual(toggles);
    const body = await agentTurn(admin, 'after the restart');
    expect(body.model).toBe(toggles.smart_mode ? 'smart-model-test' : 'model-x-test');
  }, 60_000);

  it('a kid-mode and a smart-mode change at the same moment both persist (no lost update)', async () => {
    const running = await bridgeWith(AGENT_CONFIG, DEAD_AGENT);
    try {
      for (let round = 0; round < 5; round++) {
        const value = round % 2 === 0;
        const [kid, smart] = await Promise.all([
          post(running.url, '/admin/kid-mode', { enabled: value }),
          post(running.url, '/admin/smart-mode', { enabled: value }),
        ]);
        expect(kid.status, kid.text).toBe(200);
        expect(smart.status, smart.text).toBe(200);
        const expected = { kid_mode: value, smart_mode: value };
        expect(readJson(running.state('toggles.json')), `round ${round}`).toEqual(expected);
        expect(running.bridge.toggles.get(), `round ${round}`).toEqual(expected);
      }
    } finally {
      await stop(running);
    }
  });
});
