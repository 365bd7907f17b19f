// Calendar (SPEC "Calendar", DESIGN §3). SKELETON: the helper building issue 7's calendar replaces the
// bodies; the exported names and shapes below are what the bridge wires up.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../../util/log.js';

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

export class Calendar {
  constructor(readonly options: CalendarOptions) {}

  /** Today's events (every person, or one), sorted by start. Never throws for a failing feed. */
  async today(_person?: string): Promise<CalendarToday> {
    return { date: '', time_zone: '', events: [], feeds: [] };
  }

  /** Today's events as scrubbed prompt lines (no ISO timestamps, no e-mail addresses); '' when none. */
  async promptText(): Promise<string> {
    return '';
  }

  close(): void {}
}

/** GET /api/calendar/today[?person=name]. */
export function registerCalendarRoutes(_app: FastifyInstance, _calendar: Calendar): void {}
