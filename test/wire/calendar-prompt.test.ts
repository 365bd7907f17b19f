// Today's calendar reaches the agent's prompt on the robot channel, scrubbed: the embedded agent (a real ACP
// child) sends it to the scripted model server, where we read it back.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningBridge, startTestBridge } from '../support/bridge.js';
import { FakeOpenAi } from '../support/fake-openai.js';
import { post } from '../support/http.js';

let models: FakeOpenAi;
let running: RunningBridge;
let dataDir: string;

/** An ICS feed with one event today (UTC), whose text carries an e-mail address and an ISO timestamp. */
function feedForToday(): string {
  const day = new Date().toISOString().slice(0, 10).replaceAll('-', '');
  return [
    'BEGIN:VCALENDAR',
    'VERSION:2.0',
    'PRODID:-//deskbot test//EN',
    'BEGIN:VEVENT',
    `UID:dentist-${day}@test`,
    `DTSTAMP:${day}T000000Z`,
    `DTSTART:${day}T000100Z`,
    `DTEND:${day}T235800Z`,
    'SUMMARY:Dentist with dr.smile@example.com at 2026-01-01T09:30:00Z',
    'END:VEVENT',
    'END:VCALENDAR',
    '',
  ].join('\r\n');
}

beforeAll(async () => {
  models = await new FakeOpenAi().start();
  models.responder = () => ({ text: '😊 You have the dentist today.' });
  dataDir = mkdtempSync(join(tmpdir(), 'deskbot-calendar-prompt-'));
  const feed = join(dataDir, 'alice.ics');
  writeFileSync(feed, feedForToday());
  running = await startTestBridge(
    { calendar: { feeds: [{ person: 'alice', source: feed }], time_zone: 'UTC' } },
    { dataDir, agentEnv: { AGENT_MODEL_URL: models.url } },
  );
}, 30_000);

afterAll(async () => {
  await running?.bridge.close();
  await models?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const lastPrompt = () => JSON.stringify(models.chatRequests().at(-1)?.body.messages ?? []);

describe("today's calendar in the agent prompt", () => {
  it('the robot channel gets the events, tagged with the person, without e-mail or ISO timestamps', async () => {
    const reply = await post(running.url, '/api/message', {
      content: 'what is on today',
      channel: 'deskbot',
    });
    expect(reply.status).toBe(200);
    const prompt = lastPrompt();
    expect(prompt).toContain('Dentist');
    expect(prompt).toContain('alice');
    expect(prompt).not.toContain('dr.smile@example.com');
    expect(prompt).not.toMatch(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/);
  }, 30_000);

  it('other channels get the user text alone', async () => {
    const reply = await post(running.url, '/api/message', { content: 'just chatting', channel: 'telegram' });
    expect(reply.status).toBe(200);
    expect(lastPrompt()).not.toContain('Dentist');
  }, 30_000);

  it('GET /api/calendar/today lists the event for alice', async () => {
    const today = (await (await fetch(`${running.url}/api/calendar/today?person=alice`)).json()) as any;
    expect(today.events).toHaveLength(1);
    expect(today.events[0]).toMatchObject({ person: 'alice', all_day: false });
    expect(today.events[0].title).toContain('Dentist');
    expect(today.events[0].title).not.toContain('@');
  });
});
