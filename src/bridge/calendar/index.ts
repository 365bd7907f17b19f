// Calendar (SPEC "Calendar", DESIGN §3): ICS feeds per person plus a household feed, cached, tagged with the
// person, and scrubbed before any text reaches a prompt. Files: ics.ts (parse, expand a day), feeds.ts (cache),
// source.ts (fetch, read), scrub.ts, zone.ts (Intl wall clocks), routes.ts (GET /api/calendar/today).
import type { Logger } from '../../util/log.js';
import { Feed } from './feeds.js';
import type { DayWindow, Occurrence } from './ics.js';
import { scrubEventText } from './scrub.js';
import { parseSource } from './source.js';
import {
  addDays,
  dateKeyAt,
  isoWithOffset,
  isValidTimeZone,
  machineTimeZone,
  midnightOf,
  parseDateKey,
  wallClockAt,
} from './zone.js';

export { registerCalendarRoutes } from './routes.js';
export { SCRUB_MAX_CHARS, scrubEventText } from './scrub.js';

export interface CalendarOptions {
  /** One ICS feed per person: source is an http(s) URL or a file path. */
  feeds: Array<{ person: string; source: string }>;
  /** The household feed (URL or file), tagged `household`; '' = none. */
  household: string;
  refreshSec: number;
  fetchTimeoutMs: number;
  maxFeedBytes: number;
  /** IANA zone deciding "today"; '' = this machine's zone. */
  timeZone: string;
  /** Relative file sources are resolved against this folder (default process.cwd()). */
  baseDir?: string;
  /** Epoch ms (default Date.now). */
  now?: () => number;
  logger: Logger;
  /** Told of every failed fetch or parse of a feed (the metric), with the feed's person. */
  onFetchFailure?: (person: string) => void;
  /** Most event lines in promptText (default 20); the rest are counted in one closing line. */
  maxPromptEvents?: number;
}

export interface CalendarEvent {
  person: string;
  title: string;
  /** ISO 8601 with offset for timed events; YYYY-MM-DD for all-day events. */
  start: string;
  end: string;
  all_day: boolean;
  location: string | null;
}

export interface CalendarToday {
  date: string;
  time_zone: string;
  events: CalendarEvent[];
  feeds: Array<{
    person: string;
    ok: boolean;
    fetched_at: string | null;
    events: number;
    error: string | null;
  }>;
}

export const HOUSEHOLD_PERSON = 'household';
const UNTITLED = 'Untitled event';

interface TaggedOccurrence extends Occurrence {
  person: string;
}

export class Calendar {
  /** The zone deciding "today": the configured one, else (or when it is not a valid IANA name) this machine's. */
  readonly timeZone: string;
  private readonly feeds: Feed[];
  private readonly now: () => number;

  constructor(readonly options: CalendarOptions) {
    this.now = options.now ?? Date.now;
    const configured = options.timeZone.trim();
    this.timeZone = isValidTimeZone(configured) ? configured : machineTimeZone();
    if (configured && configured !== this.timeZone) {
      // A typo in the zone must not take the bridge down; "today" in the machine's zone is the useful fallback.
      options.logger.warn(
        { configured, using: this.timeZone },
        'calendar time zone is not a valid IANA zone',
      );
    }
    const baseDir = options.baseDir ?? process.cwd();
    const entries = [...options.feeds];
    if (options.household.trim()) entries.push({ person: HOUSEHOLD_PERSON, source: options.household });
    this.feeds = entries.map(
      (entry) =>
        new Feed({
          person: entry.person,
          source: parseSource(entry.source, baseDir),
          refreshSec: options.refreshSec,
          fetchTimeoutMs: options.fetchTimeoutMs,
          maxFeedBytes: options.maxFeedBytes,
          logger: options.logger,
          onFetchFailure: options.onFetchFailure,
        }),
    );
  }

  /** Every person with a feed (`household` when the household feed is set), in configuration order. */
  persons(): string[] {
    return [...new Set(this.feeds.map((feed) => feed.person))];
  }

  /** Today's events (every person, or one), sorted by start. Never throws for a failing feed. */
  async today(person?: string): Promise<CalendarToday> {
    const { day, occurrences, feeds } = await this.collect(person);
    return {
      date: day.date,
      time_zone: this.timeZone,
      events: occurrences.map((occurrence) => this.toEvent(occurrence)),
      feeds,
    };
  }

  /** Today's events as scrubbed prompt lines (no ISO timestamps, no e-mail addresses); '' when none. */
  async promptText(): Promise<string> {
    const { day, occurrences } = await this.collect();
    if (occurrences.length === 0) return '';
    const maxLines = this.options.maxPromptEvents ?? 20;
    const heading = this.dayName(day.date, 'long');
    const lines = occurrences.slice(0, maxLines).map((occurrence) => `- ${this.promptLine(occurrence, day)}`);
    if (occurrences.length > maxLines) lines.push(`- …and ${occurrences.length - maxLines} more`);
    return [`Today's calendar (${heading}):`, ...lines].join('\n');
  }

  close(): void {
    for (const feed of this.feeds) feed.close();
  }

  private dayWindow(nowMs: number): DayWindow {
    const date = dateKeyAt(nowMs, this.timeZone);
    return {
      date,
      startMs: midnightOf(date, this.timeZone),
      endMs: midnightOf(addDays(date, 1), this.timeZone),
      timeZone: this.timeZone,
    };
  }

  private async collect(person?: string) {
    const selected = this.feeds.filter((feed) => person === undefined || feed.person === person);
    const nowMs = this.now();
    await Promise.all(selected.map((feed) => feed.refresh(nowMs)));
    const day = this.dayWindow(nowMs);
    const occurrences: TaggedOccurrence[] = [];
    const feeds: CalendarToday['feeds'] = [];
    for (const feed of selected) {
      let found: Occurrence[] = [];
      try {
        found = feed.occurrencesOn(day).occurrences;
      } catch (error) {
        this.options.logger.warn(
          { person: feed.person, err: (error as Error).message },
          'calendar expansion failed',
        );
      }
      occurrences.push(...found.map((occurrence) => ({ ...occurrence, person: feed.person })));
      const status = feed.status();
      feeds.push({
        person: feed.person,
        ok: status.ok,
        fetched_at: status.fetchedAtMs === null ? null : new Date(status.fetchedAtMs).toISOString(),
        events: found.length,
        error: status.error,
      });
    }
    occurrences.sort(byStart);
    return { day, occurrences, feeds };
  }

  private toEvent(occurrence: TaggedOccurrence): CalendarEvent {
    const location = scrubEventText(occurrence.location ?? '');
    return {
      person: occurrence.person,
      title: scrubEventText(occurrence.title) || UNTITLED,
      start: occurrence.allDay ? occurrence.startDate! : isoWithOffset(occurrence.startMs, this.timeZone),
      end: occurrence.allDay ? occurrence.endDate! : isoWithOffset(occurrence.endMs, this.timeZone),
      all_day: occurrence.allDay,
      location: location || null,
    };
  }

  private promptLine(occurrence: TaggedOccurrence, day: DayWindow): string {
    const title = scrubEventText(occurrence.title) || UNTITLED;
    const location = scrubEventText(occurrence.location ?? '');
    const where = location ? ` at ${location}` : '';
    if (occurrence.allDay) {
      const lastDay = addDays(occurrence.endDate!, -1);
      const until = lastDay > day.date ? `, until ${this.dayName(lastDay, 'long')}` : '';
      return `all day: ${title}${where}${until} (${occurrence.person})`;
    }
    const start = this.clock(occurrence.startMs, day);
    const times =
      occurrence.endMs > occurrence.startMs ? `${start}–${this.clock(occurrence.endMs, day)}` : start;
    return `${times} ${title}${where} (${occurrence.person})`;
  }

  /** 24 h local time; on another day it is named, so a 22:00–01:00 party reads "Friday 22:00–01:00". */
  private clock(epochMs: number, day: DayWindow): string {
    const wall = wallClockAt(epochMs, this.timeZone);
    const time = `${String(wall.hour).padStart(2, '0')}:${String(wall.minute).padStart(2, '0')}`;
    const date = dateKeyAt(epochMs, this.timeZone);
    return date === day.date ? time : `${this.dayName(date, 'short')} ${time}`;
  }

  private dayName(date: string, style: 'long' | 'short'): string {
    const { year, month, day } = parseDateKey(date);
    return new Intl.DateTimeFormat('en-GB', {
      timeZone: 'UTC',
      weekday: style,
      day: 'numeric',
      month: style,
    }).format(Date.UTC(year, month - 1, day));
  }
}

/** All-day events first, then by start, then the shorter one, then by title and person for a stable order. */
function byStart(a: TaggedOccurrence, b: TaggedOccurrence): number {
  if (a.allDay !== b.allDay) return a.allDay ? -1 : 1;
  return (
    a.startMs - b.startMs ||
    a.endMs - b.endMs ||
    a.title.localeCompare(b.title) ||
    a.person.localeCompare(b.person)
  );
}
