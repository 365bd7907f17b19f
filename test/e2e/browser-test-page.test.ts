// The browser client in real Chromium (headless Debian chromium through playwright-core): a page of ours that
// does on the wire what the xiaozhi-esp32-server test page does (test/fixtures/clients/browser/test-page.html,
// with the recorded data of test/fixtures/clients/browser-test-page/), served from a second origin, against the
// real voice server: the cross-origin OTA fetch with Device-Id/Client-Id headers (so a CORS preflight), the
// WebSocket with its identity in the query string, the minimal hello, MCP answers, the wake word, and a typed
// question answered with speech.
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS_DIR, loadClient } from '../support/client-replay.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

// The page-side callback runs in the browser; the project compiles without the DOM lib.
declare const document: { body: { dataset: Record<string, string | undefined> } };

interface PageReport {
  ota: { status: number; websocketUrl: string | null } | null;
  serverHello: { type: string; transport: string; session_id: string } | null;
  mcp: string[];
  frames: Array<{ type: string; state?: string; emotion?: string; text?: string }>;
  framesBeforeQuestion?: number;
  audioPackets: number;
  error: string | null;
}

const fixture = loadClient('browser-test-page');
const TYPED = 'tell me about the weather';

let model: FakeOpenAi;
let t: TestVoice;
let pages: Server;
let pagesUrl: string;
let browser: Browser;
const pageErrors: string[] = [];

/** The fixtures folder as static files: the second origin the page is served from. */
function servePages(): Promise<Server> {
  const types: Record<string, string> = { '.html': 'text/html', '.json': 'application/json' };
  const server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname));
    readFile(join(CLIENTS_DIR, path)).then(
      (body) => res.writeHead(200, { 'content-type': types[extname(path)] ?? 'text/plain' }).end(body),
      () => res.writeHead(404).end(),
    );
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: '😊 It is sunny today.' });
  [t, pages, browser] = await Promise.all([
    startTestVoice({ LLM: { TwoTier: { url: model.url, model: 'fake-model' } } }),
    servePages(),
    chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] }),
  ]);
  pagesUrl = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => pages?.close(resolve));
  await t?.close();
  await model?.close();
});

/** Opens the page against the voice server's OTA URL and waits until it reports done or failed. */
async function runPage(
  query: Record<string, string>,
): Promise<{ page: Page; report: PageReport; state: string }> {
  const page = await browser.newPage();
  page.on('pageerror', (error) => pageErrors.push(error.message));
  const search = new URLSearchParams({ ota: t.otaUrl, text: TYPED, ...query });
  await page.goto(`${pagesUrl}/browser/test-page.html?${search}`);
  await page.waitForFunction(
    () => ['done', 'failed'].includes(document.body.dataset.state ?? ''),
    undefined,
    {
      timeout: 40_000,
    },
  );
  const state = await page.evaluate(() => document.body.dataset.state ?? '');
  const report = (await page.evaluate('window.report')) as PageReport;
  return { page, report, state };
}

describe('the browser test page flow in Chromium, from another origin', () => {
  it('boots over a cross-origin OTA fetch, connects by query string, gets the server hello and a spoken answer', async () => {
    const calls = model.chatRequests().length;
    const { page, report, state } = await runPage({});
    expect(report.error, JSON.stringify(report)).toBeNull();
    expect(state).toBe('done');
    expect(pageErrors).toEqual([]);

    // The page could read the OTA reply: the preflight and the POST both passed CORS.
    expect(report.ota).toEqual({
      status: 200,
      websocketUrl: `ws://127.0.0.1:${t.voice.wsPort}/device/v1/`,
    });
    expect(report.serverHello).toMatchObject({
      type: 'hello',
      transport: 'websocket',
      session_id: expect.any(String),
    });

    // The server knows the page by the identity in its query string, and holds the tools the page answered with.
    const session = await eventually(() => t.voice.registry.get(fixture.profile.mac));
    expect(session.info.clientId).toBe(fixture.profile.clientId);
    expect(report.mcp[0]).toBe('initialize');
    expect(report.mcp).toContain('tools/list');
    await eventually(() => session.tools.length > 0, 5000);
    expect(session.tools.map((tool) => tool.name)).toEqual(fixture.mcp.tools.map((tool) => tool.name));

    // Its wake word was no model call; the typed question was exactly one, answered with speech.
    expect(model.chatRequests().length).toBe(calls + 1);
    const asked = report.frames.slice(report.framesBeforeQuestion);
    expect(asked.map((f) => `${f.type}:${f.state ?? f.emotion ?? ''}`)).toEqual([
      'stt:',
      'llm:thinking',
      'llm:happy',
      'tts:start',
      'tts:sentence_start',
      'tts:stop',
    ]);
    expect(asked[0]!.text).toBe(TYPED);
    expect(asked[1]!.text).toBe('🤔');
    expect(asked[2]!.text).toBe('😊');
    expect(asked[4]!.text).toBe('It is sunny today.');
    expect(report.audioPackets).toBeGreaterThan(5);
    await page.close();
  }, 60_000);

  it('the xiaoZhiConnect.js variant of the page, which adds an Agent-Id header, boots too', async () => {
    const { page, report, state } = await runPage({ request: '1', mac: 'AA:BB:CC:00:11:23' });
    expect(report.error, JSON.stringify(report)).toBeNull();
    expect(state).toBe('done');
    expect(report.ota?.status).toBe(200);
    expect(report.serverHello?.session_id).toEqual(expect.any(String));
    await page.close();
  }, 60_000);
});
