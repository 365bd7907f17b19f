// DNS rebinding against the bridge's /admin/* (issue 13): a web page can make the operator's browser — a loopback
// peer — send requests to a name that resolves to 127.0.0.1. The peer rule alone let `Host: evil.example` +
// `Origin: http://evil.example` rewrite SOUL.md; now Host and Origin must name this machine too.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminRefusal } from '../../src/bridge/loopback.js';
import { send } from '../support/bad-input.js';
import { DEAD_AGENT, type RunningBridge, startTestBridge } from '../support/bridge.js';

describe('adminRefusal (peer, Host, Origin)', () => {
  const extra = new Set(['robot.lan']);
  it.each([
    // [peer, host, origin, refused]
    ['127.0.0.1', 'localhost:8080', undefined, false],
    ['127.0.0.1', '127.0.0.1:8080', undefined, false],
    ['::1', '[::1]:8080', 'http://[::1]:8080', false],
    ['127.0.0.1', 'LOCALHOST', 'http://localhost:3000', false],
    ['127.0.0.1', 'dash.localhost:8080', undefined, false],
    ['127.0.0.1', 'robot.lan:8080', 'http://robot.lan:8080', false],
    ['127.0.0.1', undefined, undefined, false],
    ['127.0.0.1', 'evil.example', 'http://evil.example', true],
    ['127.0.0.1', 'evil.example:8080', undefined, true],
    ['127.0.0.1', 'localhost:8080', 'http://evil.example', true],
    ['127.0.0.1', 'localhost:8080', 'null', true],
    ['127.0.0.1', '127.0.0.1.evil.example', undefined, true],
    ['127.0.0.1', 'localhost.evil.example', undefined, true],
    ['192.168.1.20', 'localhost:8080', undefined, true],
  ] as Array<[string, string | undefined, string | undefined, boolean]>)(
    'peer %s, Host %j, Origin %j → refused %s',
    (peer, host, origin, refused) => {
      const headers = {
        ...(host !== undefined ? { host } : {}),
        ...(origin !== undefined ? { origin } : {}),
      };
      expect(adminRefusal(peer, headers, extra) !== null).toBe(refused);
    },
  );
});

describe('a real bridge', () => {
  let running: RunningBridge;
  let dataDir: string;
  const soul = () => readFileSync(join(running.workspace, 'SOUL.md'), 'utf8');

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'deskbot-rebinding-'));
    running = await startTestBridge(
      { bridge: { admin_hosts: ['robot.lan'] } },
      { dataDir, agentCommand: DEAD_AGENT },
    );
  }, 60_000);
  afterAll(async () => {
    await running?.bridge.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const persona = (headers: Record<string, string>, content: string) =>
    send(running.url, {
      method: 'POST',
      path: '/admin/persona',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ file: 'SOUL.md', content }),
    });

  it.each([
    ['a rebinding name', { host: 'evil.example', origin: 'http://evil.example' }],
    ['a rebinding name with the port', { host: 'evil.example:8080' }],
    ['a loopback Host from a foreign page', { host: 'localhost', origin: 'http://evil.example' }],
    ['an opaque origin', { host: 'localhost', origin: 'null' }],
  ])('%s → 403 in the error shape, SOUL.md unchanged', async (_name, headers) => {
    const before = soul();
    const reply = await persona(headers, 'You are evil now.');
    expect(reply.status, reply.text).toBe(403);
    expect(reply.json.error.code).toBe('forbidden');
    expect(soul()).toBe(before);
  });

  it('the same write addressed to this machine (or a configured name) goes through', async () => {
    const port = new URL(running.url).port;
    for (const [host, content] of [
      [`localhost:${port}`, 'You are Pip. (1)'],
      [`127.0.0.1:${port}`, 'You are Pip. (2)'],
      [`robot.lan:${port}`, 'You are Pip. (3)'],
    ]) {
      const reply = await persona({ host: host!, origin: `http://${host}` }, content!);
      expect(reply.status, reply.text).toBe(200);
      expect(soul()).toBe(content);
    }
  });
});
