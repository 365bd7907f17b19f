// SPEC "Calendar": ISO timestamps and e-mail addresses are stripped before any event text enters a prompt.
// Feeds are written by other people's calendar apps, so event text is untrusted: besides those two, links are
// dropped too (meeting URLs carry passwords in their query), and the result is one bounded line.

export const SCRUB_MAX_CHARS = 200;

const EMAIL = /(?:mailto:)?[\p{L}\p{N}._%+'-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)*\.\p{L}{2,}/giu;
const URL_LIKE =
  /\b(?:https?|webcal|ftp):\/\/[^\s<>()[\]{}"]+|\bwww\.[^\s/<>()]+\.[a-z]{2,}[^\s<>()[\]{}"]*/gi;
const ZONE = '(?:Z(?![A-Za-z])|[+-]\\d{2}(?::?\\d{2})?)?';
const TIME = '\\d{2}:\\d{2}(?::\\d{2}(?:[.,]\\d+)?)?';
/** Extended form: 2026-11-21, 2026-11-21T09:30, 2026-11-21 09:30:00.5+01:00, 2026-11-21T09:30:00Z. */
const ISO_EXTENDED = new RegExp(`(?<!\\d)\\d{4}-\\d{2}-\\d{2}(?:[T ]${TIME}${ZONE})?(?!\\d)`, 'gi');
/** Basic form as ICS writes it: 20261121T093000Z, 20261121T0930+0100. */
const ISO_BASIC = /(?<!\d)\d{8}T\d{4}(?:\d{2})?(?:Z(?![A-Za-z])|[+-]\d{4})?(?!\d)/gi;

// Removed spans become this private-use mark first, so the words that only introduced them can go too.
const MARK = '\uE000';
const JOINED_MARKS = /\uE000(?:\s*(?:[,;/&|]|\band\b|\bor\b)?\s*\uE000)+/gi;
const LEAD_IN =
  /\b(?:by|at|on|to|until|till|from|before|after|since|via|with|cc|contact|e-?mail|mail|write)\b\s*:?\s*(?=\uE000)/gi;

/**
 * One line of event text safe to put in a prompt: no ISO 8601 dates or timestamps, no e-mail addresses or
 * links, whitespace collapsed, no punctuation left dangling by the removals, at most SCRUB_MAX_CHARS.
 */
export function scrubEventText(text: string, maxChars = SCRUB_MAX_CHARS): string {
  let out = text
    .replace(/\\n/gi, ' ') // an escaped newline that survived a sloppy exporter
    .replace(/[\p{Cc}\p{Cf}\u2028\u2029\uE000]+/gu, ' ')
    .replace(URL_LIKE, MARK)
    .replace(EMAIL, MARK)
    .replace(ISO_EXTENDED, MARK)
    .replace(ISO_BASIC, MARK)
    .replace(JOINED_MARKS, MARK)
    .replace(LEAD_IN, '')
    .replace(/\uE000/g, ' ')
    .replace(/\s+/g, ' ');
  // Brackets and separators the removals emptied: "Call (bob@x.org)" → "Call", "Room 4, , 2nd floor" → one comma.
  for (let pass = 0; pass < 2; pass++) {
    out = out
      .replace(/[(<[{]\s*[-–—,;:/|.]*\s*[)>\]}]/g, ' ')
      .replace(/\s+([,;:.!?)\]}>])/g, '$1')
      .replace(/([([{<])\s+/g, '$1')
      .replace(/([,;:/|])(?:\s*[,;:/|])+/g, '$1')
      .replace(/\s[-–—](?:\s*[-–—,;:])+(?=\s|$)/g, ' –')
      .replace(/\s+/g, ' ')
      .trim()
      .replace(/^[\s,;:.\-–—/|@)\]}>]+/, '')
      .replace(/[\s,;:\-–—/|@([{<]+$/, '');
  }
  return capLength(out, maxChars);
}

function capLength(text: string, maxChars: number): string {
  const chars = Array.from(text);
  if (chars.length <= maxChars) return text;
  const cut = chars.slice(0, maxChars - 1).join('');
  const atWord = cut.replace(/\s+\S*$/, '');
  return `${(atWord.length >= maxChars / 2 ? atWord : cut).replace(/[\s,;:\-–—]+$/, '')}…`;
}
