// GET /api/calendar/today over real HTTP (SPEC "Calendar", DESIGN §2 error shape): a real fastify app from
// createHttpApp, feeds served by a real local HTTP server (and one file), "now" injected.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Calendar, type CalendarOptions, registerCalendarRoutes } from '../../src/bridge/calendar/index.js';
import { createHttpApp } from '../../src/util/http-app.js';
import { silentLogger } from '../../src/util/log.js';
import { expectErrorShape, expectNoStack, request } from '../support/http.js';

const FIXTURES = resolve(import.meta.dirname, '..', 'fixtures', 'calendar');
const NOW = Date.parse('2026-11-21T10:00:00Z');

let feedServer: Server;
let feedBase = '';
const feedSockets = new Set<Socket>();
const feedHits = new Map<string, number>();
const running: Array<{ app: FastifyInstance; calendar: Calendar }> = [];

beforeAll(async () => {
  feedServer = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    feedHits.set(path, (feedHits.get(path) ?? 0) + 1);
    if (path === '/down.ics') {
      res.writeHead(503).end();
      return;
    }
    const name = /^\/feeds\/([a-z-]+\.ics)$/.exec(path)?.[1];
    if (!name) {
      res.writeHead(404).end();
      return;
    }
    res
      .writeHead(200, { 'content-type': 'text/calendar; charset=utf-8' })
      .end(readFileSync(resolve(FIXTURES, name)));
  });
  feedServer.on('connection', (socket) => {
    feedSockets.add(socket);
    socket.on('close', () => feedSockets.delete(socket));
  });
  await new Promise<void>((done) => feedServer.listen(0, '127.0.0.1', done));
  feedBase = `http://127.0.0.1:${(feedServer.address() as { port: number }).port}`;
});

afterAll(async () => {
  for (const { app, calendar } of running) {
    calendar.close();
    await app.close();
  }
  for (const socket of feedSockets) socket.destroy();
  await new Promise<void>((done) => feedServer.close(() => done()));
});

/** A listening app with the calendar routes; answers its base URL. */
async function serve(overrides: Partial<CalendarOptions> = {}): Promise<string> {
  const calendar = new Calendar({
    feeds: [
      { person: 'alice', source: `${feedBase}/feeds/alice.ics?token=private-token` },
      { person: 'bob', source: 'bob.ics' },
    ],
    household: `${feedBase}/feeds/household.ics`,
    refreshSec: 900,
    fetchTimeoutMs: 2000,
    maxFeedBytes: 2 * 1024 * 1024,
    timeZone: 'Europe/Berlin',
    baseDir: FIXTURES,
    now: () => NOW,
    logger: silentLogger,
    ...overrides,
  });
  const app = createHttpApp({ logger: silentLogger });
  registerCalendarRoutes(app, calendar);
  running.push({ app, calendar });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
}

describe('GET /api/calendar/today', () => {
  let base = '';
  beforeAll(async () => {
    base = await serve();
  });

  it("answers every person's events for today, tagged, ordered, scrubbed, with each feed's status", async () => {
    const reply = await request(base, 'GET', '/api/calendar/today');
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json.date).toBe('2026-11-21');
    expect(reply.json.time_zone).toBe('Europe/Berlin');
    const rows = reply.json.events.map((event: any) => `${event.person}|${event.title}|${event.start}`);
    expect(rows).toEqual([
      'household|Grandma visiting|2026-11-20',
      'household|Bin day|2026-11-21',
      'bob|Day off|2026-11-21',
      "household|Grandma's birthday|2026-11-21",
      'household|Call with grandpa|2026-11-21T00:30:00+01:00',
      'bob|Physio exercises|2026-11-21T07:30:00+01:00',
      'alice|Swimming lesson (moved)|2026-11-21T11:00:00+01:00',
      'alice|Dentist|2026-11-21T14:00:00+01:00',
      'bob|Call with New York office|2026-11-21T14:30:00+01:00',
      'alice|Piano (moved to Saturday)|2026-11-21T16:00:00+01:00',
      "household|Parents' evening – RSVP|2026-11-21T19:00:00+01:00",
    ]);
    expect(reply.json.events[0]).toEqual({
      person: 'household',
      title: 'Grandma visiting',
      start: '2026-11-20',
      end: '2026-11-23',
      all_day: true,
      location: 'Guest room',
    });
    expect(reply.json.feeds).toEqual(
      ['alice', 'bob', 'household'].map((person) => ({
        person,
        ok: true,
        fetched_at: '2026-11-21T10:00:00.000Z',
        events: person === 'household' ? 5 : 3,
        error: null,
      })),
    );
    expect(reply.text).not.toMatch(/@|mailto:|private-token/);
  });

  it('filters by person, household included', async () => {
    const alice = await request(base, 'GET', '/api/calendar/today?person=alice');
    expect(alice.status).toBe(200);
    expect(alice.json.events.map((event: any) => event.title)).toEqual([
      'Swimming lesson (moved)',
      'Dentist',
      'Piano (moved to Saturday)',
    ]);
    expect(alice.json.feeds.map((feed: any) => feed.person)).toEqual(['alice']);
    const household = await request(base, 'GET', '/api/calendar/today?person=household');
    expect(new Set(household.json.events.map((event: any) => event.person))).toEqual(new Set(['household']));
    expect(household.json.events).toHaveLength(5);
  });

  it('fetches each feed once per refresh period however often it is asked', async () => {
    const before = feedHits.get('/feeds/alice.ics') ?? 0;
    await Promise.all([1, 2, 3].map(() => request(base, 'GET', '/api/calendar/today')));
    expect(feedHits.get('/feeds/alice.ics')).toBe(before);
  });

  it('an unknown person is a 404 in the error shape', async () => {
    const reply = await request(base, 'GET', '/api/calendar/today?person=mallory');
    expectErrorShape(reply, 404, 'unknown_person');
  });

  it.each([
    ['an empty person', '?person='],
    ['a person longer than 64 characters', `?person=${'a'.repeat(65)}`],
    ['a repeated person', '?person=alice&person=bob'],
  ])('%s is a 400 invalid_query', async (_name, query) => {
    const reply = await request(base, 'GET', `/api/calendar/today${query}`);
    expectErrorShape(reply, 400, 'invalid_query');
  });

  it('a person name of exactly 64 characters is valid (and unknown)', async () => {
    const reply = await request(base, 'GET', `/api/calendar/today?person=${'a'.repeat(64)}`);
    expectErrorShape(reply, 404, 'unknown_person');
  });
});

describe('GET /api/calendar/today, other configurations', () => {
  it('with no feeds configured: 200 and no events', async () => {
    const base = await serve({ feeds: [], household: '' });
    const reply = await request(base, 'GET', '/api/calendar/today');
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ date: '2026-11-21', time_zone: 'Europe/Berlin', events: [], feeds: [] });
  });

  it('a feed that is down is reported in feeds and the others are still served', async () => {
    const failures: string[] = [];
    const base = await serve({
      feeds: [
        { person: 'alice', source: `${feedBase}/down.ics?token=private-token` },
        { person: 'bob', source: 'bob.ics' },
      ],
      household: '',
      onFetchFailure: (person) => failures.push(person),
    });
    const reply = await request(base, 'GET', '/api/calendar/today');
    expect(reply.status).toBe(200);
    expectNoStack(reply.text);
    expect(reply.json.feeds).toEqual([
      { person: 'alice', ok: false, fetched_at: null, events: 0, error: 'HTTP 503' },
      { person: 'bob', ok: true, fetched_at: '2026-11-21T10:00:00.000Z', events: 3, error: null },
    ]);
    expect(reply.json.events.map((event: any) => event.person)).toEqual(['bob', 'bob', 'bob']);
    expect(reply.text).not.toContain('private-token');
    expect(failures).toEqual(['alice']);
  });
});
