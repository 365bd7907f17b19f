// SPEC "Calendar" / DESIGN §3: ICS feeds per person plus a household feed, tagged, cached and scrubbed.
// Real ICS files (test/fixtures/calendar, written like Google, Outlook and Apple export them) and a real local
// HTTP server; "now" is injected, never slept for.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Calendar, type CalendarOptions } from '../../src/bridge/calendar/index.js';
import { parseSource } from '../../src/bridge/calendar/source.js';
import { epochFromWallClock, midnightOf } from '../../src/bridge/calendar/zone.js';
import { silentLogger } from '../../src/util/log.js';

const FIXTURES = resolve(import.meta.dirname, '..', 'fixtures', 'calendar');
/** Saturday 21 November 2026, 11:00 in Berlin. */
const NOW = Date.parse('2026-11-21T10:00:00Z');
const FAMILY = [
  { person: 'alice', source: 'alice.ics' },
  { person: 'bob', source: 'bob.ics' },
];
const ISO_TIMESTAMP = /\d{4}-\d{2}-\d{2}|\d{8}T\d{4}|\d{2}:\d{2}:\d{2}/;
const EMAIL = /@|mailto:/i;

const calendars: Calendar[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const calendar of calendars.splice(0)) calendar.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function calendar(overrides: Partial<CalendarOptions> = {}): Calendar {
  const created = new Calendar({
    feeds: FAMILY,
    household: 'household.ics',
    refreshSec: 900,
    fetchTimeoutMs: 2000,
    maxFeedBytes: 2 * 1024 * 1024,
    timeZone: 'Europe/Berlin',
    baseDir: FIXTURES,
    now: () => NOW,
    logger: silentLogger,
    ...overrides,
  });
  calendars.push(created);
  return created;
}

/** A calendar whose clock the test moves. */
function clocked(overrides: Partial<CalendarOptions> = {}) {
  const clock = { now: NOW };
  return { clock, calendar: calendar({ now: () => clock.now, ...overrides }) };
}

/** Noon of a local date in a zone. */
const noonOf = (date: string, timeZone: string) => midnightOf(date, timeZone) + 12 * 3_600_000;

const summary = (today: Awaited<ReturnType<Calendar['today']>>) =>
  today.events.map((event) => `${event.person}|${event.title}|${event.start}|${event.end}`);

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'deskbot-calendar-'));
  dirs.push(dir);
  return dir;
}

const CRLF = '\r\n';
function ics(events: string[], extra: string[] = []): string {
  return [
    'BEGIN:VCALENDAR',
    'VERSION:2.0',
    'PRODID:-//deskbot tests//EN',
    ...extra,
    ...events,
    'END:VCALENDAR',
    '',
  ].join(CRLF);
}
function vevent(uid: string, title: string, start: string, end: string, more: string[] = []): string {
  return [
    'BEGIN:VEVENT',
    `UID:${uid}`,
    'DTSTAMP:20261101T000000Z',
    `DTSTART${start}`,
    `DTEND${end}`,
    `SUMMARY:${title}`,
    ...more,
    'END:VEVENT',
  ].join(CRLF);
}

function captureLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines, warnings: () => lines.filter((line) => line.level === 40) };
}

/** A local ICS server; each route counts its hits. */
class IcsServer {
  readonly hits = new Map<string, number>();
  private readonly sockets = new Set<Socket>();
  private server: Server | null = null;
  base = '';

  constructor(private readonly routes: Record<string, (res: ServerResponse, hit: number) => void>) {}

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const hit = (this.hits.get(path) ?? 0) + 1;
      this.hits.set(path, hit);
      const route = this.routes[path];
      if (route) route(res, hit);
      else res.writeHead(404).end();
    });
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((done) => this.server!.listen(0, '127.0.0.1', done));
    this.base = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((done) => this.server?.close(() => done()) ?? done());
  }
}

describe('which events are today', () => {
  it('lists every feed, tagged with its person, all-day first then by start, in the calendar zone', async () => {
    const today = await calendar().today();
    expect(today.date).toBe('2026-11-21');
    expect(today.time_zone).toBe('Europe/Berlin');
    expect(summary(today)).toEqual([
      'household|Grandma visiting|2026-11-20|2026-11-23',
      'household|Bin day|2026-11-21|2026-11-22',
      'bob|Day off|2026-11-21|2026-11-22',
      "household|Grandma's birthday|2026-11-21|2026-11-22",
      'household|Call with grandpa|2026-11-21T00:30:00+01:00|2026-11-21T01:00:00+01:00',
      'bob|Physio exercises|2026-11-21T07:30:00+01:00|2026-11-21T07:45:00+01:00',
      'alice|Swimming lesson (moved)|2026-11-21T11:00:00+01:00|2026-11-21T12:00:00+01:00',
      'alice|Dentist|2026-11-21T14:00:00+01:00|2026-11-21T15:00:00+01:00',
      'bob|Call with New York office|2026-11-21T14:30:00+01:00|2026-11-21T15:30:00+01:00',
      'alice|Piano (moved to Saturday)|2026-11-21T16:00:00+01:00|2026-11-21T16:45:00+01:00',
      "household|Parents' evening – RSVP|2026-11-21T19:00:00+01:00|2026-11-21T20:30:00+01:00",
    ]);
    expect(today.events.map((event) => event.all_day)).toEqual([
      ...Array(4).fill(true),
      ...Array(7).fill(false),
    ]);
    expect(today.feeds).toEqual([
      { person: 'alice', ok: true, fetched_at: '2026-11-21T10:00:00.000Z', events: 3, error: null },
      { person: 'bob', ok: true, fetched_at: '2026-11-21T10:00:00.000Z', events: 3, error: null },
      { person: 'household', ok: true, fetched_at: '2026-11-21T10:00:00.000Z', events: 5, error: null },
    ]);
  });

  it('scrubs the free text of the events it returns', async () => {
    const events = (await calendar().today()).events;
    const evening = events.find((event) => event.title.startsWith("Parents' evening"));
    expect(evening).toMatchObject({ title: "Parents' evening – RSVP", location: 'Room 4' });
    // The Outlook meeting's location is only a dial-in link with a password in it.
    expect(events.find((event) => event.title === 'Call with New York office')?.location).toBeNull();
    expect(events.find((event) => event.title === 'Dentist')?.location).toBe('Smile Dental, Hauptstr. 5');
  });

  it.each([
    // [zone, events expected today, events expected absent]
    ['Europe/Berlin', ['Call with grandpa'], ['Late film']],
    // Grandpa's call ends exactly at London's midnight: the day is [midnight, next midnight).
    ['Europe/London', ['Late film'], ['Call with grandpa']],
    ['America/New_York', ['Late film'], ['Call with grandpa']],
    ['Asia/Tokyo', ['Call with grandpa'], ['Late film']],
  ])('UTC events near midnight belong to today only in some zones: %s', async (timeZone, present, absent) => {
    const titles = (await calendar({ timeZone }).today('household')).events.map((event) => event.title);
    for (const title of present) expect(titles).toContain(title);
    for (const title of absent) expect(titles).not.toContain(title);
  });

  it('floating times are read in the calendar zone', async () => {
    for (const timeZone of ['Europe/Berlin', 'America/New_York', 'Asia/Tokyo']) {
      const evening = (await calendar({ timeZone }).today('household')).events.find((event) =>
        event.title.startsWith("Parents' evening"),
      );
      expect(evening?.start.slice(11, 16), timeZone).toBe('19:00');
    }
  });

  it('converts zoned times: a VTIMEZONE, an Outlook zone name with its VTIMEZONE, a bare IANA TZID', async () => {
    const tokyo = await calendar({ timeZone: 'Asia/Tokyo' }).today();
    const start = (title: string) => tokyo.events.find((event) => event.title === title)?.start;
    expect(start('Dentist')).toBe('2026-11-21T22:00:00+09:00'); // TZID=Europe/Berlin + VTIMEZONE
    expect(start('Physio exercises')).toBe('2026-11-21T15:30:00+09:00'); // TZID="W. Europe Standard Time"
    expect(start('Call with New York office')).toBe('2026-11-21T22:30:00+09:00'); // no VTIMEZONE: Intl
  });

  it("follows the file's own VTIMEZONE rather than Intl's idea of a zone with the same name", async () => {
    const dir = tempDir();
    const doctored = [
      'BEGIN:VTIMEZONE',
      'TZID:Europe/Berlin',
      'BEGIN:STANDARD',
      'DTSTART:19700101T000000',
      'TZOFFSETFROM:+0300',
      'TZOFFSETTO:+0300',
      'END:STANDARD',
      'END:VTIMEZONE',
    ];
    const event = vevent(
      'z',
      'Odd zone',
      ';TZID=Europe/Berlin:20261121T100000',
      ';TZID=Europe/Berlin:20261121T110000',
    );
    writeFileSync(join(dir, 'odd.ics'), ics([event], doctored));
    const today = await calendar({
      feeds: [{ person: 'alice', source: 'odd.ics' }],
      household: '',
      baseDir: dir,
      timeZone: 'UTC',
    }).today();
    expect(today.events[0]?.start).toBe('2026-11-21T07:00:00+00:00');
  });

  it('today is the local date of now in the calendar zone', async () => {
    expect((await calendar({ timeZone: 'Pacific/Kiritimati' }).today()).date).toBe('2026-11-22');
    expect((await calendar({ timeZone: 'Pacific/Pago_Pago' }).today()).date).toBe('2026-11-20');
    expect((await calendar({ timeZone: 'America/New_York' }).today()).date).toBe('2026-11-21');
  });

  it("uses this machine's zone for '' and for a zone that does not exist (with a warning)", async () => {
    const machine = Intl.DateTimeFormat().resolvedOptions().timeZone;
    expect(calendar({ timeZone: '' }).timeZone).toBe(machine);
    const { logger, warnings } = captureLogger();
    expect(calendar({ timeZone: 'Mars/Olympus_Mons', logger }).timeZone).toBe(machine);
    expect(warnings()).toHaveLength(1);
  });

  it('filters by person; an unknown person has no events and no feeds', async () => {
    const cal = calendar();
    expect(cal.persons()).toEqual(['alice', 'bob', 'household']);
    const alice = await cal.today('alice');
    expect(new Set(alice.events.map((event) => event.person))).toEqual(new Set(['alice']));
    expect(alice.feeds.map((feed) => feed.person)).toEqual(['alice']);
    expect(await cal.today('nobody')).toMatchObject({ events: [], feeds: [] });
  });

  it('with no feeds configured there is nothing, and nothing to fail', async () => {
    const cal = calendar({ feeds: [], household: '' });
    expect(await cal.today()).toEqual({
      date: '2026-11-21',
      time_zone: 'Europe/Berlin',
      events: [],
      feeds: [],
    });
    expect(await cal.promptText()).toBe('');
  });
});

describe('recurrence', () => {
  const on = async (cal: { clock: { now: number }; calendar: Calendar }, date: string, person?: string) => {
    cal.clock.now = noonOf(date, 'Europe/Berlin');
    return summary(await cal.calendar.today(person));
  };

  it('weekly rule with an EXDATE and a moved instance (RECURRENCE-ID), across a DST change', async () => {
    const cal = clocked();
    const swim = (rows: string[]) => rows.filter((row) => row.includes('Swimming'));
    expect(swim(await on(cal, '2026-09-05', 'alice'))).toEqual([
      'alice|Swimming lesson|2026-09-05T09:30:00+02:00|2026-09-05T10:30:00+02:00',
    ]);
    expect(swim(await on(cal, '2026-11-07', 'alice'))).toEqual([
      'alice|Swimming lesson|2026-11-07T09:30:00+01:00|2026-11-07T10:30:00+01:00',
    ]);
    expect(swim(await on(cal, '2026-11-14', 'alice'))).toEqual([]);
    expect(swim(await on(cal, '2026-11-21', 'alice'))).toEqual([
      'alice|Swimming lesson (moved)|2026-11-21T11:00:00+01:00|2026-11-21T12:00:00+01:00',
    ]);
    expect(swim(await on(cal, '2026-11-28', 'alice'))).toHaveLength(1);
  });

  it('an instance moved to another day shows on the new day only', async () => {
    const cal = clocked();
    const piano = (rows: string[]) => rows.filter((row) => row.includes('Piano'));
    expect(piano(await on(cal, '2026-11-17', 'alice'))).toEqual([
      'alice|Piano|2026-11-17T17:00:00+01:00|2026-11-17T17:45:00+01:00',
    ]);
    expect(piano(await on(cal, '2026-11-21', 'alice'))).toEqual([
      'alice|Piano (moved to Saturday)|2026-11-21T16:00:00+01:00|2026-11-21T16:45:00+01:00',
    ]);
    expect(piano(await on(cal, '2026-11-24', 'alice'))).toEqual([]);
    expect(piano(await on(cal, '2026-12-01', 'alice'))).toHaveLength(1);
  });

  it('an instance cancelled by its own override (STATUS:CANCELLED + RECURRENCE-ID) is gone', async () => {
    const cal = clocked();
    const piano = (rows: string[]) => rows.filter((row) => row.includes('Piano'));
    expect(piano(await on(cal, '2026-12-08', 'alice'))).toEqual([]);
    expect(piano(await on(cal, '2026-12-15', 'alice'))).toEqual([
      'alice|Piano|2026-12-15T17:00:00+01:00|2026-12-15T17:45:00+01:00',
    ]);
  });

  it('an override belongs to its own series only, even when another series has an instance at that time', async () => {
    const dir = tempDir();
    const daily = ['RRULE:FREQ=DAILY'];
    writeFileSync(
      join(dir, 'two.ics'),
      ics([
        vevent('yoga', 'Yoga', ':20261101T080000Z', ':20261101T083000Z', daily),
        vevent('run', 'Run', ':20261101T080000Z', ':20261101T083000Z', daily),
        vevent('run', 'Run (evening)', ':20261121T180000Z', ':20261121T183000Z', [
          'RECURRENCE-ID:20261121T080000Z',
        ]),
      ]),
    );
    const today = await calendar({
      feeds: [{ person: 'alice', source: 'two.ics' }],
      household: '',
      baseDir: dir,
      timeZone: 'UTC',
    }).today();
    expect(summary(today)).toEqual([
      'alice|Yoga|2026-11-21T08:00:00+00:00|2026-11-21T08:30:00+00:00',
      'alice|Run (evening)|2026-11-21T18:00:00+00:00|2026-11-21T18:30:00+00:00',
    ]);
  });

  it('a recurring multi-day all-day event covers every one of its days', async () => {
    const dir = tempDir();
    const trip = vevent('w', 'Camp', ';VALUE=DATE:20261101', ';VALUE=DATE:20261104', ['RRULE:FREQ=WEEKLY']);
    writeFileSync(join(dir, 'camp.ics'), ics([trip]));
    const cal = clocked({ feeds: [{ person: 'alice', source: 'camp.ics' }], household: '', baseDir: dir });
    const days = ['2026-11-15', '2026-11-16', '2026-11-17', '2026-11-18', '2026-11-21', '2026-11-22'];
    const covered: string[] = [];
    for (const date of days) if ((await on(cal, date)).length > 0) covered.push(date);
    expect(covered).toEqual(['2026-11-15', '2026-11-16', '2026-11-17', '2026-11-22']);
    expect(await on(cal, '2026-11-17')).toEqual(['alice|Camp|2026-11-15|2026-11-18']);
  });

  it('a COUNT-limited daily rule stops after COUNT instances', async () => {
    const cal = clocked();
    const days = [
      '2026-11-17',
      '2026-11-18',
      '2026-11-19',
      '2026-11-20',
      '2026-11-21',
      '2026-11-22',
      '2026-11-23',
    ];
    const seen: string[] = [];
    for (const date of days) {
      if ((await on(cal, date, 'bob')).some((row) => row.includes('Physio'))) seen.push(date);
    }
    expect(seen).toEqual(days.slice(1, 6));
  });

  it('all-day events: single, weekly, and multi-day up to DTEND exclusive', async () => {
    const cal = clocked();
    const allDay = async (date: string) =>
      (await on(cal, date, 'household')).filter((row) => !row.includes('T')).map((row) => row.split('|')[1]);
    expect(await allDay('2026-11-19')).toEqual([]);
    expect(await allDay('2026-11-20')).toEqual(['Grandma visiting']);
    expect(await allDay('2026-11-21')).toEqual(['Grandma visiting', 'Bin day', "Grandma's birthday"]);
    expect(await allDay('2026-11-22')).toEqual(['Grandma visiting']);
    expect(await allDay('2026-11-23')).toEqual([]);
    expect(await allDay('2026-10-03')).toEqual(['Bin day']);
    expect(await allDay('2026-09-26')).toEqual([]);
  });

  it('a cancelled event is left out', async () => {
    const titles = (await calendar().today('household')).events.map((event) => event.title);
    expect(titles).not.toContain('Football practice');
  });

  it('a rule no date can satisfy is given up on in bounded time; the rest of the feed is served', async () => {
    const { logger, warnings } = captureLogger();
    const startedMs = performance.now();
    const today = await calendar({
      feeds: [{ person: 'zed', source: 'impossible-rule.ics' }],
      household: '',
      timeZone: 'UTC',
      logger,
    }).today();
    expect(performance.now() - startedMs).toBeLessThan(10_000);
    expect(summary(today)).toEqual(['zed|Reading club|2026-11-21T18:00:00+00:00|2026-11-21T19:00:00+00:00']);
    expect(warnings()).toEqual([expect.objectContaining({ person: 'zed', skipped: 1 })]);
  });
});

describe('wall clocks in a zone', () => {
  const wall = (text: string) => {
    const [year, month, day, hour, minute] = text.split(/[-T:]/).map(Number);
    return { year: year!, month: month!, day: day!, hour: hour!, minute: minute!, second: 0 };
  };
  it.each([
    ['an ordinary time', '2026-11-21T09:30', 'Europe/Berlin', '2026-11-21T08:30:00.000Z'],
    [
      'skipped by spring forward: moves on by the gap',
      '2026-03-29T02:30',
      'Europe/Berlin',
      '2026-03-29T01:30:00.000Z',
    ],
    [
      'happens twice in autumn: the first one',
      '2026-10-25T02:30',
      'Europe/Berlin',
      '2026-10-25T00:30:00.000Z',
    ],
    ['southern hemisphere summer time', '2026-01-10T12:00', 'Australia/Sydney', '2026-01-10T01:00:00.000Z'],
  ])('%s', (_name, local, zone, utc) => {
    expect(new Date(epochFromWallClock(wall(local), zone)).toISOString()).toBe(utc);
  });

  it('the autumn DST day is 25 hours long and its late events are still today', async () => {
    expect(midnightOf('2026-10-26', 'Europe/Berlin') - midnightOf('2026-10-25', 'Europe/Berlin')).toBe(
      25 * 3_600_000,
    );
    const dir = tempDir();
    writeFileSync(join(dir, 'late.ics'), ics([vevent('l', 'Late', ':20261025T233000', ':20261025T234500')]));
    const today = await calendar({
      feeds: [{ person: 'alice', source: 'late.ics' }],
      household: '',
      baseDir: dir,
      now: () => Date.parse('2026-10-25T22:00:00Z'),
    }).today();
    expect(summary(today)).toEqual(['alice|Late|2026-10-25T23:30:00+01:00|2026-10-25T23:45:00+01:00']);
  });
});

describe('promptText', () => {
  it('reads like a list for a person: local 24 h times, no ISO timestamps, no e-mail addresses', async () => {
    const text = await calendar().promptText();
    expect(text).toBe(
      [
        "Today's calendar (Saturday 21 November):",
        '- all day: Grandma visiting at Guest room, until Sunday 22 November (household)',
        '- all day: Bin day (household)',
        '- all day: Day off (bob)',
        "- all day: Grandma's birthday (household)",
        '- 00:30–01:00 Call with grandpa (household)',
        '- 07:30–07:45 Physio exercises (bob)',
        '- 11:00–12:00 Swimming lesson (moved) at Hallenbad Nord, Lane 3 (alice)',
        '- 14:00–15:00 Dentist at Smile Dental, Hauptstr. 5 (alice)',
        '- 14:30–15:30 Call with New York office (bob)',
        '- 16:00–16:45 Piano (moved to Saturday) (alice)',
        "- 19:00–20:30 Parents' evening – RSVP at Room 4 (household)",
      ].join('\n'),
    );
    expect(text).not.toMatch(ISO_TIMESTAMP);
    expect(text).not.toMatch(EMAIL);
    expect(text).not.toMatch(/https?:|pwd=/);
  });

  it('names the other day of an event that crosses midnight; all-day events still come first', async () => {
    const dir = tempDir();
    writeFileSync(
      join(dir, 'night.ics'),
      ics([
        vevent('p', 'Party', ':20261120T220000', ':20261121T010000'),
        vevent('t', 'Night train', ':20261121T230000', ':20261122T020000'),
        vevent('r', 'Reminder', ':20261121T090000', ':20261121T090000'),
        vevent('h', 'Holiday', ';VALUE=DATE:20261121', ';VALUE=DATE:20261122'),
      ]),
    );
    const text = await calendar({
      feeds: [{ person: 'alice', source: 'night.ics' }],
      household: '',
      baseDir: dir,
    }).promptText();
    expect(text.split('\n').slice(1)).toEqual([
      '- all day: Holiday (alice)',
      '- Fri 20 Nov 22:00–01:00 Party (alice)',
      '- 09:00 Reminder (alice)',
      '- 23:00–Sun 22 Nov 02:00 Night train (alice)',
    ]);
  });

  it('is empty on a day without events and capped at 20 event lines', async () => {
    const dir = tempDir();
    const many = Array.from({ length: 25 }, (_, i) => {
      const hh = String(i).padStart(2, '0').slice(-2);
      return vevent(
        `m${i}`,
        `Slot ${i}`,
        `:20261121T${i < 24 ? hh : '23'}0000Z`,
        `:20261121T${i < 24 ? hh : '23'}3000Z`,
      );
    });
    writeFileSync(join(dir, 'many.ics'), ics(many));
    const busy = calendar({
      feeds: [{ person: 'alice', source: 'many.ics' }],
      household: '',
      baseDir: dir,
      timeZone: 'UTC',
    });
    const lines = (await busy.promptText()).split('\n');
    expect(lines).toHaveLength(1 + 20 + 1);
    expect(lines.at(-1)).toBe('- …and 5 more');
    const quiet = calendar({
      now: () => noonOf('2026-12-25', 'Europe/Berlin'),
      feeds: [{ person: 'bob', source: 'bob.ics' }],
      household: '',
    });
    expect(await quiet.promptText()).toBe('');
  });
});

describe('feed sources and the cache', () => {
  it('understands webcal:// and credentials in the URL; labels for logs carry only scheme and host', () => {
    expect(parseSource('webcal://p42-caldav.icloud.example/published/2/s3cret', '/')).toEqual({
      kind: 'http',
      url: new URL('https://p42-caldav.icloud.example/published/2/s3cret'),
      authorization: null,
      label: 'https://p42-caldav.icloud.example',
    });
    const withUser = parseSource('https://me:pa%24s@cloud.example/remote.php/dav/alice?export', '/');
    expect(withUser).toMatchObject({ kind: 'http', label: 'https://cloud.example' });
    expect(withUser.kind === 'http' && withUser.url.href).toBe(
      'https://cloud.example/remote.php/dav/alice?export',
    );
    expect(withUser.kind === 'http' && withUser.authorization).toBe(
      `Basic ${Buffer.from('me:pa$s').toString('base64')}`,
    );
    expect(parseSource('feeds/a.ics', '/srv/deskbot')).toMatchObject({
      kind: 'file',
      path: '/srv/deskbot/feeds/a.ics',
    });
  });

  it('an unusable source is a failing feed, not an exception', async () => {
    const failures: string[] = [];
    const today = await calendar({
      feeds: [{ person: 'alice', source: 'https://exa mple.com:99999/x.ics' }],
      household: '',
      onFetchFailure: (person) => failures.push(person),
    }).today();
    expect(today.feeds).toEqual([
      { person: 'alice', ok: false, fetched_at: null, events: 0, error: 'the feed URL is not a valid URL' },
    ]);
    expect(failures).toEqual(['alice']);
  });

  it('reads relative paths against baseDir, absolute paths and file:// URLs', async () => {
    const absolute = join(FIXTURES, 'bob.ics');
    const cal = calendar({
      feeds: [
        { person: 'alice', source: 'alice.ics' },
        { person: 'bob', source: absolute },
      ],
      household: pathToFileURL(join(FIXTURES, 'household.ics')).href,
      baseDir: FIXTURES,
    });
    expect((await cal.today()).feeds.map((feed) => [feed.person, feed.ok, feed.events])).toEqual([
      ['alice', true, 3],
      ['bob', true, 3],
      ['household', true, 5],
    ]);
  });

  it('a file changed on disk is not re-read before refreshSec, and is after', async () => {
    const dir = tempDir();
    const write = (title: string) =>
      writeFileSync(
        join(dir, 'feed.ics'),
        ics([vevent('v', title, ':20261121T090000Z', ':20261121T100000Z')]),
      );
    write('Version one');
    const { clock, calendar: cal } = clocked({
      feeds: [{ person: 'alice', source: 'feed.ics' }],
      household: '',
      baseDir: dir,
    });
    const titles = async () => (await cal.today()).events.map((event) => event.title);
    expect(await titles()).toEqual(['Version one']);
    write('Version two');
    clock.now = NOW + 899_999;
    expect(await titles()).toEqual(['Version one']);
    expect(await cal.promptText()).toContain('Version one');
    clock.now = NOW + 900_000;
    expect(await titles()).toEqual(['Version two']);
    expect((await cal.today()).feeds[0]?.fetched_at).toBe(new Date(NOW + 900_000).toISOString());
  });

  it('concurrent callers share one fetch', async () => {
    const body = ics([vevent('s', 'Shared', ':20261121T090000Z', ':20261121T100000Z')]);
    const server = new IcsServer({
      '/slow.ics': (res) =>
        setTimeout(() => res.writeHead(200, { 'content-type': 'text/calendar' }).end(body), 50),
    });
    await server.start();
    try {
      const cal = calendar({
        feeds: [{ person: 'alice', source: `${server.base}/slow.ics` }],
        household: '',
      });
      const [a, b, text] = await Promise.all([cal.today(), cal.today('alice'), cal.promptText()]);
      expect(server.hits.get('/slow.ics')).toBe(1);
      expect(a.events.map((event) => event.title)).toEqual(['Shared']);
      expect(b.events).toEqual(a.events);
      expect(text).toContain('Shared');
    } finally {
      await server.stop();
    }
  });

  it('close() aborts an in-flight fetch: today() returns at once and no failure is counted', async () => {
    const server = new IcsServer({ '/hang.ics': () => {} });
    await server.start();
    try {
      const failures: string[] = [];
      const cal = calendar({
        feeds: [{ person: 'alice', source: `${server.base}/hang.ics` }],
        household: '',
        fetchTimeoutMs: 30_000,
        onFetchFailure: (person) => failures.push(person),
      });
      const pending = cal.today();
      while (!server.hits.get('/hang.ics')) await new Promise((done) => setTimeout(done, 5));
      const closedAt = performance.now();
      cal.close();
      const today = await pending;
      expect(performance.now() - closedAt).toBeLessThan(1000);
      expect(today.events).toEqual([]);
      expect(failures).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});

describe('failing feeds', () => {
  const good = ics([vevent('g', 'Good event', ':20261121T090000Z', ':20261121T100000Z')]);
  let server: IcsServer;
  let flakyUp = true;

  beforeAll(async () => {
    server = new IcsServer({
      '/private/s3cret-path/ok.ics': (res) => res.writeHead(200).end(good),
      '/error.ics': (res) => res.writeHead(500).end('oops'),
      '/flaky.ics': (res) => (flakyUp ? res.writeHead(200).end(good) : res.writeHead(500).end()),
      '/big-chunked.ics': (res) => {
        res.writeHead(200, { 'content-type': 'text/calendar' });
        for (let i = 0; i < 4; i++) res.write('X'.repeat(600));
        res.end();
      },
      '/big-declared.ics': (res) => res.writeHead(200, { 'content-length': '5000' }).end('Y'.repeat(5000)),
      '/hang.ics': () => {},
    });
    await server.start();
  });
  afterAll(() => server.stop());

  /** One feed that fails plus one that works, with the failure counter and the log captured. */
  async function failing(source: string, overrides: Partial<CalendarOptions> = {}) {
    const failures: string[] = [];
    const log = captureLogger();
    const cal = calendar({
      feeds: [
        { person: 'alice', source },
        { person: 'bob', source: `${server.base}/private/s3cret-path/ok.ics?token=s3cret` },
      ],
      household: '',
      logger: log.logger,
      onFetchFailure: (person) => failures.push(person),
      ...overrides,
    });
    const today = await cal.today();
    return { today, failures, log, feed: today.feeds[0]! };
  }

  it.each([
    ['a malformed file', 'malformed.ics', {}, /^not a valid iCalendar file: /],
    ['a missing file', 'no-such-feed.ics', {}, /^file not found$/],
    ['a file over maxFeedBytes', 'alice.ics', { maxFeedBytes: 1024 }, /^feed is larger than 1024 bytes$/],
    ['HTTP 500', '/error.ics', {}, /^HTTP 500$/],
    [
      'a chunked body over maxFeedBytes',
      '/big-chunked.ics',
      { maxFeedBytes: 1024 },
      /larger than 1024 bytes/,
    ],
    [
      'a declared length over maxFeedBytes',
      '/big-declared.ics',
      { maxFeedBytes: 1024 },
      /larger than 1024 bytes/,
    ],
    ['a server that never answers', '/hang.ics', { fetchTimeoutMs: 100 }, /^timed out after 100 ms$/],
    ['a refused connection', 'http://127.0.0.1:1/feed.ics', {}, /^network error/],
  ])(
    '%s: counted once, logged once, the other feed still served',
    async (_name, source, overrides, reason) => {
      const url = source.startsWith('/') ? `${server.base}${source}` : source;
      const { today, failures, log, feed } = await failing(url, overrides as Partial<CalendarOptions>);
      expect(failures).toEqual(['alice']);
      expect(feed).toMatchObject({ person: 'alice', ok: false, fetched_at: null, events: 0 });
      expect(feed.error).toMatch(reason);
      expect(log.warnings()).toEqual([expect.objectContaining({ person: 'alice', reason: feed.error })]);
      expect(summary(today)).toEqual(['bob|Good event|2026-11-21T10:00:00+01:00|2026-11-21T11:00:00+01:00']);
      expect(today.feeds[1]).toMatchObject({ person: 'bob', ok: true });
    },
  );

  it('a failed refresh keeps serving the last good events and waits refreshSec before trying again', async () => {
    flakyUp = true;
    const failures: string[] = [];
    const log = captureLogger();
    const { clock, calendar: cal } = clocked({
      feeds: [{ person: 'alice', source: `${server.base}/flaky.ics?token=s3cret` }],
      household: '',
      logger: log.logger,
      onFetchFailure: (person) => failures.push(person),
    });
    const hitsBefore = server.hits.get('/flaky.ics') ?? 0;
    expect((await cal.today()).events.map((event) => event.title)).toEqual(['Good event']);
    flakyUp = false;
    clock.now = NOW + 900_000;
    const stale = await cal.today();
    expect(stale.events.map((event) => event.title)).toEqual(['Good event']);
    expect(stale.feeds[0]).toEqual({
      person: 'alice',
      ok: false,
      fetched_at: new Date(NOW).toISOString(),
      events: 1,
      error: 'HTTP 500',
    });
    expect(failures).toEqual(['alice']);
    // Within refreshSec of the failed attempt: no new request, no new failure.
    clock.now = NOW + 1_700_000;
    await cal.promptText();
    expect(server.hits.get('/flaky.ics')).toBe(hitsBefore + 2);
    expect(failures).toEqual(['alice']);
    flakyUp = true;
    clock.now = NOW + 1_800_000;
    expect((await cal.today()).feeds[0]).toMatchObject({ ok: true, error: null });
    expect(server.hits.get('/flaky.ics')).toBe(hitsBefore + 3);
    const warnings = log.warnings();
    expect(warnings).toEqual([expect.objectContaining({ person: 'alice', reason: 'HTTP 500', stale: true })]);
  });

  it('never logs or reports a URL path or query string (they hold the secret)', async () => {
    const { today, log } = await failing(`${server.base}/error.ics?token=s3cret`);
    const everything = JSON.stringify(log.lines) + JSON.stringify(today);
    expect(everything).not.toContain('s3cret');
    expect(everything).not.toContain('token=');
    expect(log.warnings()[0]).toMatchObject({ source: server.base });
  });
});
