// ICS parsing and per-day expansion on top of ical.js: recurrence (RRULE, RDATE, EXDATE, RECURRENCE-ID),
// all-day dates and time zones. Everything ical.js hands back is turned into plain instants and date keys here.
import ICAL from 'ical.js';
import {
  addDays,
  dateKeyOf,
  epochFromWallClock,
  isValidTimeZone,
  midnightOf,
  type WallClock,
} from './zone.js';

type IcalEvent = InstanceType<typeof ICAL.Event>;
type IcalTime = InstanceType<typeof ICAL.Time>;
type IcalComponent = InstanceType<typeof ICAL.Component>;

/** One event instance, materialised. All-day instances carry date keys; their instants are local midnights. */
export interface Occurrence {
  uid: string;
  title: string;
  location: string | null;
  allDay: boolean;
  startMs: number;
  endMs: number;
  /** YYYY-MM-DD, all-day only. */
  startDate: string | null;
  /** YYYY-MM-DD, exclusive (as in ICS), all-day only. */
  endDate: string | null;
}

/** The local day being asked about, in the calendar zone. */
export interface DayWindow {
  date: string;
  startMs: number;
  endMs: number;
  timeZone: string;
}

interface EventGroup {
  master: IcalEvent | null;
  exceptions: IcalEvent[];
}

export interface ParsedCalendar {
  groups: EventGroup[];
  /** VEVENTs dropped at parse time (no usable DTSTART). */
  skipped: number;
}

export class IcsError extends Error {}

export interface ExpandResult {
  occurrences: Occurrence[];
  /** Events left out of this day because their dates or recurrence could not be evaluated in budget. */
  skipped: number;
}

const DAY_MS = 86_400_000;
/** Recurrence iterations one event may cost per day expansion (5-10 µs each: a daily rule over 50 years). */
export const EVENT_RECURRENCE_BUDGET = 20_000;
/** Recurrence iterations one feed may cost per day expansion, whatever its number of events. */
export const FEED_RECURRENCE_BUDGET = 200_000;

// ical.js loops inside a single next() call until a candidate passes the rule's limiting BY* parts, so a rule
// no date can satisfy (FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30) never returns. No option bounds that loop; counting
// the checks it makes and throwing past a budget is the one hook that does. Outside expandDay the budget is
// infinite, so other users of ical.js in the process are unaffected.
class RecurrenceBudgetError extends Error {}
// The counter lives on globalThis and the patch is marked on the prototype: should this module be evaluated
// again (test isolation, reloads) while ical.js stays loaded, old and new copies still share one counter.
const BUDGET = Symbol.for('deskbot.calendar.recurrenceBudget');
const shared = globalThis as typeof globalThis & { [BUDGET]?: { checksLeft: number } };
shared[BUDGET] ??= { checksLeft: Number.POSITIVE_INFINITY };
const budget = shared[BUDGET];
const iteratorProto = ICAL.RecurIterator.prototype as typeof ICAL.RecurIterator.prototype & {
  [BUDGET]?: true;
};
if (!iteratorProto[BUDGET]) {
  const check = iteratorProto.check_contracting_rules;
  iteratorProto.check_contracting_rules = function (this: typeof iteratorProto) {
    budget.checksLeft -= 1;
    if (budget.checksLeft < 0) throw new RecurrenceBudgetError('recurrence budget exhausted');
    return check.call(this);
  };
  iteratorProto[BUDGET] = true;
}

/**
 * What ical.js's parser complained about, without the line it quotes: a feed is often private (a secret URL's
 * content), and the reason goes to the log, /api/calendar status and the dashboard. Unknown messages are not
 * passed through at all, as any of them might quote the feed.
 */
const PARSE_FAILURES: Array<[RegExp, string]> = [
  [/^invalid line \(no token/, 'a line is neither a property nor a component (no ":" or ";")'],
  [/no matching double quote/, 'a parameter value has an unclosed double quote'],
  [/^Invalid parameters/, 'a property has invalid parameters'],
  [/^Missing parameter value/, 'a parameter has no value'],
  [/^Empty parameter name/, 'a parameter has no name'],
  [/component began but did not end/, 'a component (BEGIN) is never closed (END)'],
];

function parseFailure(message: string): string {
  return PARSE_FAILURES.find(([pattern]) => pattern.test(message))?.[1] ?? 'the file structure is broken';
}

export function parseIcs(text: string): ParsedCalendar {
  let jcal: unknown;
  try {
    jcal = ICAL.parse(text.replace(/^\uFEFF/, ''));
  } catch (error) {
    throw new IcsError(`not a valid iCalendar file: ${parseFailure((error as Error).message)}`);
  }
  // Several VCALENDARs in one file parse to a list of them.
  const roots = Array.isArray(jcal) && Array.isArray(jcal[0]) ? (jcal as unknown[][]) : [jcal as unknown[]];
  const calendars = roots
    .filter((root) => Array.isArray(root) && root[0] === 'vcalendar')
    .map((root) => new ICAL.Component(root));
  if (calendars.length === 0) throw new IcsError('not a valid iCalendar file: no VCALENDAR');

  const byUid = new Map<string, EventGroup>();
  const groups: EventGroup[] = [];
  let skipped = 0;
  for (const vevent of calendars.flatMap((calendar) => calendar.getAllSubcomponents('vevent'))) {
    let event: IcalEvent;
    try {
      // Left to itself, ical.js relates every RECURRENCE-ID in the file to every event, whatever its UID;
      // exceptions are related below, by UID.
      event = new ICAL.Event(vevent, { strictExceptions: true, exceptions: [] });
      // ical.js decorates values lazily; touching them here drops a broken event once, not on every expansion.
      if (!event.startDate) throw new Error('no DTSTART');
      void event.endDate;
      if (event.isRecurrenceException()) void event.recurrenceId.toString();
    } catch {
      skipped += 1;
      continue;
    }
    const uid = event.uid || '';
    let group = uid ? byUid.get(uid) : undefined;
    if (!group || (!event.isRecurrenceException() && group.master)) {
      group = { master: null, exceptions: [] };
      groups.push(group);
      if (uid) byUid.set(uid, group);
    }
    if (event.isRecurrenceException()) group.exceptions.push(event);
    else group.master = event;
  }
  for (const group of groups) {
    for (const exception of group.exceptions) {
      try {
        group.master?.relateException(exception);
      } catch {
        // An unrelatable exception is still shown as an event of its own.
      }
    }
  }
  return { groups, skipped };
}

/** The instances of a parsed calendar that overlap one local day. Never throws. */
export function expandDay(parsed: ParsedCalendar, day: DayWindow): ExpandResult {
  const occurrences: Occurrence[] = [];
  let skipped = 0;
  let feedBudget = FEED_RECURRENCE_BUDGET;
  const saved = budget.checksLeft;
  try {
    for (const group of parsed.groups) {
      const eventBudget = Math.min(EVENT_RECURRENCE_BUDGET, feedBudget);
      budget.checksLeft = eventBudget;
      try {
        // A cancelled override still takes its instance out of the series, so it is related but not shown.
        const seriesCancelled = group.master !== null && isCancelled(group.master);
        if (group.master && !seriesCancelled) expandMaster(group.master, day, occurrences);
        for (const exception of group.exceptions) {
          if (seriesCancelled || isCancelled(exception)) continue;
          const occurrence = materialise(exception, exception.startDate, day.timeZone);
          if (overlaps(occurrence, day)) occurrences.push(occurrence);
        }
      } catch {
        skipped += 1;
      }
      feedBudget -= eventBudget - Math.max(0, budget.checksLeft);
    }
  } finally {
    budget.checksLeft = saved;
  }
  return { occurrences, skipped };
}

function expandMaster(master: IcalEvent, day: DayWindow, out: Occurrence[]): void {
  if (!master.isRecurring()) {
    const occurrence = materialise(master, master.startDate, day.timeZone);
    if (overlaps(occurrence, day)) out.push(occurrence);
    return;
  }
  if (endsBefore(master, day)) return;
  const span = spanOf(master, day.timeZone);
  const spanMs = span.durationDays > 0 ? span.durationDays * DAY_MS : span.durationMs;
  const iterator = master.iterator();
  // The budget patch bounds ical.js; this bounds our own loop should a rule somehow avoid the patched check.
  for (let step = 0; step < EVENT_RECURRENCE_BUDGET; step++) {
    const next = iterator.next();
    if (!next) return;
    // Wall clock read as UTC is within ±14 h of the true instant: a cheap filter before any zone conversion.
    const wallMs = wallAsUtcMs(next);
    if (wallMs - DAY_MS >= day.endMs) return;
    if (wallMs + spanMs + DAY_MS < day.startMs) continue;
    const details = master.getOccurrenceDetails(next);
    const item = details.item ?? master;
    // An instance overridden by its own RECURRENCE-ID is expanded from that component, wherever it moved to;
    // a RANGE=THISANDFUTURE override also reshapes the later instances, which stay here.
    if (item !== master && item.recurrenceId.compare(next) === 0) continue;
    const occurrence = materialise(item, details.startDate ?? next, day.timeZone);
    if (overlaps(occurrence, day)) out.push(occurrence);
  }
  throw new RecurrenceBudgetError('too many occurrences before this day');
}

/** True when every rule has an UNTIL before the day and no RDATE could add a later instance. */
function endsBefore(master: IcalEvent, day: DayWindow): boolean {
  const component = master.component;
  if (component.hasProperty('rdate')) return false;
  const rules = component.getAllProperties('rrule').map((property) => property.getFirstValue());
  return (
    rules.length > 0 &&
    rules.every((rule) => {
      const until = rule instanceof ICAL.Recur ? rule.until : null;
      return until !== null && until !== undefined && wallAsUtcMs(until) + 2 * DAY_MS < day.startMs;
    })
  );
}

interface Span {
  startTzid: string | null;
  durationMs: number;
  durationDays: number;
}

/** How long an instance of this event lasts, measured once from its own DTSTART/DTEND/DURATION. */
function spanOf(event: IcalEvent, calendarZone: string): Span {
  const start = event.startDate;
  const startTzid = tzidOf(event.component, 'dtstart');
  if (start.isDate) {
    const end = event.endDate;
    const days = Math.round((wallAsUtcMs(end) - wallAsUtcMs(start)) / DAY_MS);
    return { startTzid, durationMs: 0, durationDays: Math.max(1, days) };
  }
  const startMs = toEpochMs(start, startTzid, calendarZone);
  let endMs = startMs;
  if (event.component.hasProperty('dtend')) {
    endMs = toEpochMs(event.endDate, tzidOf(event.component, 'dtend') ?? startTzid, calendarZone);
  } else if (event.component.hasProperty('duration')) {
    endMs = startMs + event.duration.toSeconds() * 1000;
  }
  return { startTzid, durationMs: Math.max(0, endMs - startMs), durationDays: 0 };
}

function materialise(event: IcalEvent, start: IcalTime, calendarZone: string): Occurrence {
  const span = spanOf(event, calendarZone);
  const base = {
    uid: event.uid || '',
    title: textProp(event.component, 'summary'),
    location: textProp(event.component, 'location') || null,
  };
  if (start.isDate) {
    const startDate = dateKeyOf(start);
    const endDate = addDays(startDate, span.durationDays);
    return {
      ...base,
      allDay: true,
      startMs: midnightOf(startDate, calendarZone),
      endMs: midnightOf(endDate, calendarZone),
      startDate,
      endDate,
    };
  }
  const startMs = toEpochMs(start, span.startTzid, calendarZone);
  return {
    ...base,
    allDay: false,
    startMs,
    endMs: startMs + span.durationMs,
    startDate: null,
    endDate: null,
  };
}

function overlaps(occurrence: Occurrence, day: DayWindow): boolean {
  if (occurrence.allDay) {
    return occurrence.startDate! <= day.date && day.date < occurrence.endDate!;
  }
  if (occurrence.startMs >= day.endMs) return false;
  // A zero-length event (a reminder) belongs to the day it happens on.
  if (occurrence.endMs <= occurrence.startMs) return occurrence.startMs >= day.startMs;
  return occurrence.endMs > day.startMs;
}

/**
 * The instant of an ical.js time. Zoned times (a VTIMEZONE in the file, or UTC) are ical.js's to convert.
 * A time ical.js calls floating either had no TZID (it is in the calendar zone) or named a zone the file
 * does not define; an IANA name is then converted with Intl, anything else falls back to the calendar zone.
 */
export function toEpochMs(time: IcalTime, tzid: string | null, calendarZone: string): number {
  if (time.zone && time.zone !== ICAL.Timezone.localTimezone) return time.toUnixTime() * 1000;
  const zone = (tzid && ianaZone(tzid)) || calendarZone;
  return epochFromWallClock(wallOf(time), zone);
}

const ianaCache = new Map<string, string | null>();

/** An IANA zone for a TZID: the TZID itself, or its tail for prefixed forms like /mozilla.org/2005_1/Europe/Berlin. */
function ianaZone(tzid: string): string | null {
  const cached = ianaCache.get(tzid);
  if (cached !== undefined) return cached;
  const segments = tzid.replace(/^"|"$/g, '').split('/').filter(Boolean);
  let found: string | null = null;
  for (let take = Math.min(3, segments.length); take >= 1 && !found; take--) {
    const candidate = segments.slice(-take).join('/');
    if (isValidTimeZone(candidate)) found = candidate;
  }
  ianaCache.set(tzid, found);
  return found;
}

function tzidOf(component: IcalComponent, name: string): string | null {
  const value = component.getFirstProperty(name)?.getParameter('tzid');
  const tzid = Array.isArray(value) ? value[0] : value;
  return typeof tzid === 'string' && tzid ? tzid : null;
}

const isCancelled = (event: IcalEvent): boolean =>
  textProp(event.component, 'status').toUpperCase() === 'CANCELLED';

function textProp(component: IcalComponent, name: string): string {
  const value = component.getFirstPropertyValue(name);
  return typeof value === 'string' ? value.trim() : '';
}

const wallOf = (time: IcalTime): WallClock => ({
  year: time.year,
  month: time.month,
  day: time.day,
  hour: time.isDate ? 0 : time.hour,
  minute: time.isDate ? 0 : time.minute,
  second: time.isDate ? 0 : time.second,
});

const wallAsUtcMs = (time: IcalTime): number => {
  const wall = wallOf(time);
  return Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second);
};
