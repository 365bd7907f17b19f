// Wall-clock arithmetic in IANA zones through Intl, so the calendar needs no time-zone database of its own.
// Used for "today" in the calendar zone and for TZIDs that name an IANA zone but come without a VTIMEZONE.

export interface WallClock {
  year: number;
  /** 1-12 */
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const DAY_MS = 86_400_000;
const formatters = new Map<string, Intl.DateTimeFormat>();

// Formatter construction costs far more than formatting, and recurrence expansion converts thousands of times.
function partsFormatter(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

export function isValidTimeZone(timeZone: string): boolean {
  if (!timeZone) return false;
  try {
    partsFormatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

export function machineTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

export function wallClockAt(epochMs: number, timeZone: string): WallClock {
  const wall: WallClock = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of partsFormatter(timeZone).formatToParts(epochMs)) {
    if (part.type in wall) wall[part.type as keyof WallClock] = Number(part.value);
  }
  return wall;
}

const wallAsUtcMs = (wall: WallClock): number =>
  Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second);

/** Milliseconds to add to UTC to get the zone's wall clock at that instant. */
export function offsetMsAt(epochMs: number, timeZone: string): number {
  const wholeSecondMs = Math.floor(epochMs / 1000) * 1000;
  return wallAsUtcMs(wallClockAt(wholeSecondMs, timeZone)) - wholeSecondMs;
}

/**
 * The instant a wall-clock time names in a zone. Like Temporal's "compatible" disambiguation: a time that
 * happens twice (autumn) is the earlier one; a time skipped by a spring-forward gap moves forward by the gap.
 */
export function epochFromWallClock(wall: WallClock, timeZone: string): number {
  const localMs = wallAsUtcMs(wall);
  // No zone changes its offset twice within two days, so these are the offsets on either side of any change.
  const offsetBefore = offsetMsAt(localMs - DAY_MS, timeZone);
  const offsetAfter = offsetMsAt(localMs + DAY_MS, timeZone);
  const valid = [localMs - offsetBefore, localMs - offsetAfter].filter(
    (candidate) => candidate + offsetMsAt(candidate, timeZone) === localMs,
  );
  return valid.length > 0 ? Math.min(...valid) : localMs - offsetBefore;
}

const pad = (value: number, width = 2): string => String(Math.abs(value)).padStart(width, '0');

export const dateKeyOf = (wall: Pick<WallClock, 'year' | 'month' | 'day'>): string =>
  `${pad(wall.year, 4)}-${pad(wall.month)}-${pad(wall.day)}`;

/** YYYY-MM-DD of an instant in a zone. */
export const dateKeyAt = (epochMs: number, timeZone: string): string =>
  dateKeyOf(wallClockAt(epochMs, timeZone));

export function parseDateKey(key: string): { year: number; month: number; day: number } {
  const [year = 0, month = 0, day = 0] = key.split('-').map(Number);
  return { year, month, day };
}

export function addDays(key: string, days: number): string {
  const { year, month, day } = parseDateKey(key);
  const shifted = new Date(Date.UTC(year, month - 1, day + days));
  return dateKeyOf({
    year: shifted.getUTCFullYear(),
    month: shifted.getUTCMonth() + 1,
    day: shifted.getUTCDate(),
  });
}

/** Local midnight of a date in a zone (01:00 where a DST change skips midnight). */
export const midnightOf = (key: string, timeZone: string): number =>
  epochFromWallClock({ ...parseDateKey(key), hour: 0, minute: 0, second: 0 }, timeZone);

/** ISO 8601 with the zone's offset, e.g. 2026-11-21T09:30:00+01:00. */
export function isoWithOffset(epochMs: number, timeZone: string): string {
  const wall = wallClockAt(epochMs, timeZone);
  const offsetMin = Math.round(offsetMsAt(epochMs, timeZone) / 60_000);
  const sign = offsetMin < 0 ? '-' : '+';
  return (
    `${dateKeyOf(wall)}T${pad(wall.hour)}:${pad(wall.minute)}:${pad(wall.second)}` +
    `${sign}${pad(Math.trunc(Math.abs(offsetMin) / 60))}:${pad(Math.abs(offsetMin) % 60)}`
  );
}
