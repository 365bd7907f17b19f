// set-tier1slim-model and whitespace keys, on a real voice server with the TwoTier provider and a spoken turn
// from the virtual robot: a key of only whitespace is blank (refused over a real key, 409 blank_api_key, the
// live endpoint untouched), a real key is sent trimmed, and a blank key never becomes an empty bearer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAi } from '../support/fake-openai.js';
import { connectRobot, startTestVoice, type TestVoice } from '../support/voice.js';

let local: FakeOpenAi;
let other: FakeOpenAi;
const servers: TestVoice[] = [];

beforeAll(async () => {
  local = await new FakeOpenAi().start();
  other = await new FakeOpenAi().start();
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await Promise.all([local.close(), other.close()]);
});

async function voiceWithKey(apiKey: string): Promise<TestVoice> {
  const server = await startTestVoice({
    voice_provider: 'twotier',
    LLM: { TwoTier: { url: local.url, api_key: apiKey, model: 'small-4b', timeout: 5 } },
  });
  servers.push(server);
  return server;
}

async function swap(server: TestVoice, body: Record<string, string>) {
  const response = await fetch(`${server.httpUrl}/device/admin/set-tier1slim-model`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as any };
}

/** One spoken turn; returns the chat request it caused on `model`. */
async function spokenTurn(server: TestVoice, model: FakeOpenAi) {
  const before = model.chatRequests().length;
  const { robot } = await connectRobot(server);
  const done = robot.waitFor((f) => f.type === 'tts' && f.state === 'stop', 20_000);
  robot.listen('detect', 'auto', 'who is answering');
  await done;
  robot.dropConnection();
  expect(model.chatRequests().length).toBe(before + 1);
  return model.chatRequests().at(-1)!;
}

describe('set-tier1slim-model with whitespace keys', () => {
  let server: TestVoice;
  beforeAll(async () => {
    server = await voiceWithKey('local-key');
  }, 60_000);

  it.each(['   ', '\t', ' \n '])(
    'refuses api_key %j over a real key; the live endpoint is unchanged',
    async (key) => {
      const refused = await swap(server, { model: 'big', url: other.url, api_key: key });
      expect(refused.status).toBe(409);
      expect(refused.json.error.code).toBe('blank_api_key');
      expect(refused.json.error.message).toMatch(/blank/);
      const sent = await spokenTurn(server, local);
      expect(sent.body.model).toBe('small-4b');
      expect(sent.headers.authorization).toBe('Bearer local-key');
    },
    30_000,
  );

  it('accepts a real key with surrounding whitespace and sends it trimmed', async () => {
    const swapped = await swap(server, { model: 'big', url: other.url, api_key: '  new-key \n' });
    expect(swapped.status).toBe(200);
    expect(swapped.json.model).toMatchObject({ model: 'big', url: other.url });
    const sent = await spokenTurn(server, other);
    expect(sent.body.model).toBe('big');
    expect(sent.headers.authorization).toBe('Bearer new-key');
  }, 30_000);
});

it('a whitespace key over a blank one is accepted and sends no Authorization header, not an empty bearer', async () => {
  const server = await voiceWithKey('  ');
  const swapped = await swap(server, { model: 'small-4b', url: local.url, api_key: '   ' });
  expect(swapped.status).toBe(200);
  const sent = await spokenTurn(server, local);
  expect(sent.headers.authorization).toBeUndefined();
}, 60_000);
