// Stream transforms for reply text, chunk by chunk. Pure (no I/O).
import { ALLOWED_LEADING_EMOJI, FALLBACK_EMOJI, splitLeadingEmoji } from '../../robot/emotions.js';

const MARKER = '[REMEMBER:';

/**
 * Removes `[REMEMBER: fact]` markers from streamed text and collects the facts. Text that might still be the
 * start of a marker is held back until it is clear; a marker cut off at the end of the stream still counts.
 */
export class RememberFilter {
  readonly facts: string[] = [];
  private held = '';

  push(chunk: string): string {
    this.held += chunk;
    let out = '';
    for (;;) {
      const open = this.held.indexOf('[');
      if (open < 0) {
        out += this.held;
        this.held = '';
        return out;
      }
      out += this.held.slice(0, open);
      this.held = this.held.slice(open);
      const head = this.held.slice(0, MARKER.length).toUpperCase();
      if (!MARKER.startsWith(head)) {
        // "[" that is not a marker: release it and look further
        out += this.held[0];
        this.held = this.held.slice(1);
        continue;
      }
      if (head.length < MARKER.length) return out; // could still become a marker
      const close = this.held.indexOf(']');
      if (close < 0) return out; // inside a marker: wait for its end
      this.keep(this.held.slice(MARKER.length, close));
      this.held = this.held.slice(close + 1);
    }
  }

  end(): string {
    const rest = this.held;
    this.held = '';
    if (rest.toUpperCase().startsWith(MARKER)) {
      this.keep(rest.slice(MARKER.length));
      return '';
    }
    return rest;
  }

  private keep(fact: string): void {
    const clean = fact.trim();
    if (clean) this.facts.push(clean);
  }
}

/** Makes sure the reply starts with one of the nine allowed emoji, putting 😐 in front otherwise. */
export class LeadingEmojiFilter {
  private decided = false;
  private held = '';

  push(chunk: string): string {
    if (this.decided) return chunk;
    this.held += chunk;
    const trimmed = this.held.trimStart();
    // An emoji is at most a few code units; wait until there is something beyond it to judge.
    if (trimmed.length < 4 && !/[\p{L}\p{N}]/u.test(trimmed)) return '';
    return this.decide();
  }

  end(): string {
    return this.decided ? '' : this.decide();
  }

  private decide(): string {
    this.decided = true;
    const text = this.held.trimStart();
    this.held = '';
    if (!text) return '';
    const { emoji } = splitLeadingEmoji(text);
    if (emoji && ALLOWED_LEADING_EMOJI[emoji.replace(/\uFE0F/g, '')]) return text;
    return `${FALLBACK_EMOJI} ${text}`;
  }
}
