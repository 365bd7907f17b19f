// SPEC "Calendar": ISO timestamps and e-mail addresses are stripped before event text enters a prompt.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SCRUB_MAX_CHARS, scrubEventText } from '../../src/bridge/calendar/scrub.js';

/** What must never survive: any ISO 8601 date (extended or ICS basic form) or e-mail address. */
const ISO_OR_EMAIL = /\d{4}-\d{2}-\d{2}|\d{8}T\d{4}|@|mailto:/i;

describe('scrubEventText', () => {
  it.each([
    ['plain text passes', 'Dentist', 'Dentist'],
    ['whitespace and newlines collapse', '  Dentist \n  check-up  ', 'Dentist check-up'],
    ['UTC timestamp', 'Dentist 2026-11-21T09:30:00Z', 'Dentist'],
    ['timestamp with offset, text after it kept', 'Standup 2026-11-21T09:30:00+01:00 daily', 'Standup daily'],
    ['fractional seconds', 'Deploy 2026-11-21T09:30:00.123Z', 'Deploy'],
    ['space separator, the word leading to it goes too', 'Moved to 2026-11-21 09:30', 'Moved'],
    ['ICS basic form', 'Created 20261121T093000Z by sync', 'Created by sync'],
    ['basic form with offset between dashes', 'Kickoff – 20261121T0930+0100 – room 2', 'Kickoff – room 2'],
    ['bare date', 'Holiday 2026-11-21', 'Holiday'],
    ['date interval', 'Trip 2026-11-21/2026-11-23', 'Trip'],
    ['a Z that starts a word stays', 'Meet 2026-11-21 Zoom call', 'Meet Zoom call'],
    ['list of timestamps', 'Review: 2026-11-21T09:30:00Z, 2026-11-22T09:30:00Z and 2026-11-23', 'Review'],
    ['e-mail', 'Call bob@example.com', 'Call'],
    ['e-mail in brackets leaves no empty brackets', 'Call (bob@example.com) today', 'Call today'],
    ['e-mail in angle brackets', 'Sync <carol@example.com> 2026-11-21', 'Sync'],
    ['plus address and long domain', 'Lunch with alice.smith+work@mail.example.co.uk', 'Lunch'],
    ['mailto: prefix', 'Room 4 (mailto:office@school.example)', 'Room 4'],
    ['MAILTO in capitals', 'Ask MAILTO:Desk@Example.ORG first', 'Ask first'],
    ['only addresses leave nothing', 'alice@example.org, bob@example.org', ''],
    ['label with nothing left', 'Contact: alice@example.org; 2026-11-21T10:00Z', ''],
    [
      'both in one summary',
      "Parents' evening – RSVP to teacher@school.example by 2026-11-20T17:00:00Z",
      "Parents' evening – RSVP",
    ],
    ['links (passwords in query strings)', 'Zoom https://zoom.us/j/123?pwd=secret', 'Zoom'],
    ['times and versions are not dates', 'Version 2.0 release at 10:30', 'Version 2.0 release at 10:30'],
    ['digit runs are not dates', 'Invoice 12345678', 'Invoice 12345678'],
    ['non-ASCII text kept', 'Bäckerei Müller, Hauptstraße 5', 'Bäckerei Müller, Hauptstraße 5'],
    ['comma left before a removal', 'Room 4, office@school.example, 2nd floor', 'Room 4, 2nd floor'],
    ['control and bidi characters', 'Dentist\u0007\u202e here', 'Dentist here'],
    ['empty', '', ''],
    ['blank', '   ', ''],
  ])('%s', (_name, input, expected) => {
    expect(scrubEventText(input)).toBe(expected);
  });

  it(`caps length at ${SCRUB_MAX_CHARS} characters, at a word boundary when there is one`, () => {
    const words = scrubEventText('word '.repeat(60));
    expect(Array.from(words).length).toBeLessThanOrEqual(SCRUB_MAX_CHARS);
    expect(words).toMatch(/^(word )+word…$/);
    const oneWord = scrubEventText('x'.repeat(300));
    expect(Array.from(oneWord)).toHaveLength(SCRUB_MAX_CHARS);
    expect(oneWord.endsWith('…')).toBe(true);
    expect(scrubEventText('x'.repeat(SCRUB_MAX_CHARS))).toBe('x'.repeat(SCRUB_MAX_CHARS));
  });

  it('never lets a timestamp or address through, wherever it sits in arbitrary text', () => {
    const secret = fc.constantFrom(
      '2026-11-21T09:30:00Z',
      '2026-11-21T09:30:00+01:00',
      '2026-11-21 09:30',
      '20261121T093000Z',
      '2026-11-21',
      'someone@example.org',
      'mailto:first.last+tag@sub.example.co.uk',
    );
    const filler = fc.string({ maxLength: 20 }).map((text) => text.replace(/[\d@]/g, ''));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(filler, secret), { minLength: 1, maxLength: 5 }),
        filler,
        (parts, tail) => {
          const input = parts.map(([text, token]) => `${text} ${token}`).join(' ') + tail;
          const out = scrubEventText(input);
          expect(out).not.toMatch(ISO_OR_EMAIL);
          expect(out).not.toMatch(/\s{2}|^\s|\s$/);
        },
      ),
      { numRuns: 300 },
    );
  });
});
