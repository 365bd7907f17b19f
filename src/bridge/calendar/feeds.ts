// One ICS feed and its cache: fetched lazily at most once per refresh period, one fetch shared by concurrent
// callers, and the last good calendar kept (stale) when a refresh fails.
import type { Logger } from '../../util/log.js';
import { type DayWindow, type ExpandResult, expandDay, type ParsedCalendar, parseIcs } from './ics.js';
import { FeedError, type FeedSource, readSource } from './source.js';

export interface FeedOptions {
  person: string;
  source: FeedSource;
  refreshSec: number;
  fetchTimeoutMs: number;
  maxFeedBytes: number;
  logger: Logger;
  onFetchFailure?: (person: string) => void;
}

export class Feed {
  readonly person: string;
  private parsed: ParsedCalendar | null = null;
  private generation = 0;
  private attemptedAtMs: number | null = null;
  private fetchedAtMs: number | null = null;
  private lastError: string | null = null;
  private inFlight: Promise<void> | null = null;
  private closed = false;
  private readonly closing = new AbortController();
  private dayCache: { date: string; timeZone: string; generation: number; result: ExpandResult } | null =
    null;

  constructor(private readonly options: FeedOptions) {
    this.person = options.person;
  }

  /** Refetches when the last attempt is older than refreshSec. Never rejects. */
  refresh(nowMs: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.inFlight) return this.inFlight;
    const ageMs = this.attemptedAtMs === null ? Number.POSITIVE_INFINITY : nowMs - this.attemptedAtMs;
    // A clock set backwards would otherwise freeze the feed until it caught up.
    if (ageMs >= 0 && ageMs < this.options.refreshSec * 1000) return Promise.resolve();
    this.attemptedAtMs = nowMs;
    this.inFlight = this.load(nowMs).finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  private async load(nowMs: number): Promise<void> {
    const { source, fetchTimeoutMs, maxFeedBytes } = this.options;
    try {
      const text = await readSource(source, {
        timeoutMs: fetchTimeoutMs,
        maxBytes: maxFeedBytes,
        signal: this.closing.signal,
      });
      const parsed = parseIcs(text);
      if (this.closed) return;
      this.parsed = parsed;
      this.generation += 1;
      this.fetchedAtMs = nowMs;
      this.lastError = null;
      const events = parsed.groups.length;
      if (parsed.skipped > 0) {
        this.options.logger.warn(
          { person: this.person, skipped: parsed.skipped, events },
          'calendar feed has events without a usable start; they are left out',
        );
      }
      this.options.logger.debug({ person: this.person, events }, 'calendar feed refreshed');
    } catch (error) {
      if (error instanceof FeedError && error.aborted) return;
      const reason = (error as Error).message || 'unknown error';
      this.lastError = reason;
      this.options.onFetchFailure?.(this.person);
      this.options.logger.warn(
        { person: this.person, source: source.label, reason, stale: this.parsed !== null },
        'calendar feed refresh failed',
      );
    }
  }

  /** This feed's instances on a day, from the last good fetch (memoised per day). Never throws. */
  occurrencesOn(day: DayWindow): ExpandResult {
    if (!this.parsed) return { occurrences: [], skipped: 0 };
    const cached = this.dayCache;
    if (
      cached &&
      cached.date === day.date &&
      cached.timeZone === day.timeZone &&
      cached.generation === this.generation
    ) {
      return cached.result;
    }
    const result = expandDay(this.parsed, day);
    if (result.skipped > 0) {
      this.options.logger.warn(
        { person: this.person, skipped: result.skipped, date: day.date },
        'calendar events with a recurrence or date that cannot be evaluated are left out',
      );
    }
    this.dayCache = { date: day.date, timeZone: day.timeZone, generation: this.generation, result };
    return result;
  }

  status(): { ok: boolean; fetchedAtMs: number | null; error: string | null } {
    const error = this.lastError ?? (this.fetchedAtMs === null ? 'not fetched yet' : null);
    return { ok: error === null && this.fetchedAtMs !== null, fetchedAtMs: this.fetchedAtMs, error };
  }

  close(): void {
    this.closed = true;
    this.closing.abort();
  }
}
