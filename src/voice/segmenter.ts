// Turns a streamed reply into speakable segments. Pure.
// The first segment may end at a clause break (comma, colon, semicolon) so the first audio leaves sooner;
// later segments end at sentence ends. "3.5" and "..." are not sentence ends; a lone final "." waits
// for the next character (it might be a decimal point) unless the stream has ended.

export interface SegmenterOptions {
  /** The first segment may end at a clause break once it has this many characters. */
  minFirstClauseChars?: number;
  /** A segment with no break is cut at a space after this many characters. */
  maxSegmentChars?: number;
}

const SENTENCE_END = /[.!?…。！？]/;
const CLAUSE_BREAK = /[,;:，；：]/;
const ABBREVIATIONS = new Set(['mr', 'mrs', 'ms', 'dr', 'st', 'vs', 'eg', 'ie', 'etc', 'prof', 'sr', 'jr']);

export class Segmenter {
  private buffer = '';
  private emitted = 0;
  private readonly minFirstClauseChars: number;
  private readonly maxSegmentChars: number;

  constructor(options: SegmenterOptions = {}) {
    this.minFirstClauseChars = options.minFirstClauseChars ?? 8;
    this.maxSegmentChars = options.maxSegmentChars ?? 220;
  }

  /** Adds streamed text; returns the segments it completed. */
  push(delta: string): string[] {
    this.buffer += delta;
    const out: string[] = [];
    for (;;) {
      const cut = this.findCut(false);
      if (cut < 0) break;
      this.take(cut, out);
    }
    return out;
  }

  /** Ends the stream; returns what is left as a last segment. */
  flush(): string[] {
    const out: string[] = [];
    for (;;) {
      const cut = this.findCut(true);
      if (cut < 0) break;
      this.take(cut, out);
    }
    this.take(this.buffer.length, out);
    return out;
  }

  private take(end: number, out: string[]): void {
    const segment = this.buffer.slice(0, end).trim();
    this.buffer = this.buffer.slice(end);
    // Cuts only happen after letters, so a segment without any is what is left at the end of the stream:
    // kept when it is all there is (an emoji-only reply still shows its emotion), else dropped.
    if (segment && (hasLetters(segment) || this.emitted === 0)) {
      out.push(segment);
      this.emitted++;
    }
  }

  /** Index just past the end of the next complete segment, or -1. */
  private findCut(final: boolean): number {
    const text = this.buffer;
    const first = this.emitted === 0;
    for (let i = 0; i < text.length; i++) {
      if (i >= this.maxSegmentChars) {
        const space = text.lastIndexOf(' ', this.maxSegmentChars);
        return space > 0 ? space + 1 : this.maxSegmentChars;
      }
      const ch = text[i]!;
      // A segment needs words: punctuation or emoji with none before it never ends one.
      if (!hasLetters(text.slice(0, i))) continue;
      if (ch === '\n') return i + 1;
      const isEnd = SENTENCE_END.test(ch);
      const isClause =
        first && CLAUSE_BREAK.test(ch) && letterCount(text.slice(0, i)) >= this.minFirstClauseChars;
      if (!isEnd && !isClause) continue;
      // Run of end punctuation ("...", "?!") and closing quotes/brackets stay with the segment.
      let j = i + 1;
      while (j < text.length && (SENTENCE_END.test(text[j]!) || /["'”’)\]]/.test(text[j]!))) j++;
      if (j >= text.length) return final ? j : -1; // wait: the next character decides
      const next = text[j]!;
      if (ch === '.' && /\d/.test(next) && /\d$/.test(text.slice(0, i))) continue; // 3.5
      if (isClause && /\d/.test(next)) continue; // 1,000
      if (!/\s/.test(next)) continue; // "e.g" or "U.S" mid-token
      if (ch === '.' && j === i + 1 && ABBREVIATIONS.has(lastWord(text.slice(0, i)))) continue;
      return j;
    }
    return -1;
  }
}

function hasLetters(text: string): boolean {
  return /[\p{L}\p{N}]/u.test(text);
}

function letterCount(text: string): number {
  return (text.match(/[\p{L}\p{N}]/gu) ?? []).length;
}

function lastWord(text: string): string {
  return (/([\p{L}.]+)$/u.exec(text)?.[1] ?? '').replace(/\./g, '').toLowerCase();
}

/** Removes markdown and other things a voice should not read out. */
export function cleanForSpeech(text: string): string {
  return text
    .replace(/```[\s\S]*?```/g, ' ')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]+)\]\([^)]*\)/g, '$1')
    .replace(/https?:\/\/\S+/g, ' ')
    .replace(/(\*\*|__)(.+?)\1/g, '$2')
    .replace(/(^|[\s(])[*_]([^*_\n]+)[*_](?=[\s).,!?]|$)/g, '$1$2')
    .replace(/^\s{0,3}(#{1,6}|>|[-*+]|\d+[.)])\s+/gm, '')
    .replace(/[*_#>|~]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}
