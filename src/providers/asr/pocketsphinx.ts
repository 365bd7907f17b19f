import { createDecoder, DEFAULT_MODEL_DIR, type PocketsphinxDecoder } from '../native/pocketsphinx-lib.js';
import type { AsrProvider } from './types.js';

export interface PocketsphinxOptions {
  modelDir?: string;
  /** Command phrases recognised by the grammar (lowercase words). */
  commands: string[];
}

export class PocketsphinxAsr implements AsrProvider {
  readonly name = 'pocketsphinx';
  private readonly decoder: PocketsphinxDecoder;
  private readonly hasGrammar: boolean;
  readonly commands: string[];

  constructor(options: PocketsphinxOptions) {
    this.decoder = createDecoder(options.modelDir ?? DEFAULT_MODEL_DIR);
    // A word missing from the dictionary would make the whole grammar fail to load.
    this.commands = [...new Set(options.commands.map(normalise))].filter((phrase) =>
      phrase?.split(' ').every((word) => this.decoder.phones(word) !== null),
    );
    this.hasGrammar = this.commands.length > 0;
    if (this.hasGrammar) this.decoder.addGrammar('commands', commandGrammar(this.commands));
  }

  describe(): string {
    return `pocketsphinx (en-us general model + ${this.commands.length} command phrases)`;
  }

  async transcribe(pcm16k: Int16Array, signal: AbortSignal): Promise<string> {
    if (pcm16k.length < 1600) return ''; // under 100 ms: nothing to recognise
    const free = await this.decoder.decode('_default', pcm16k);
    if (signal.aborted || !this.hasGrammar) return free.text;
    const command = await this.decoder.decode('commands', pcm16k);
    const phonesOf = (text: string) =>
      text
        .split(/\s+/)
        .filter(Boolean)
        .flatMap((w) => this.decoder.phones(w) ?? []);
    return decideCommand(command.text, free.text, phonesOf) ?? free.text;
  }
}

export function commandGrammar(phrases: string[]): string {
  return `#JSGF V1.0;\ngrammar commands;\npublic <command> = ${phrases.join(' | ')};\n`;
}

const STOPWORDS = new Set(['a', 'an', 'the', 'to', 'me', 'you', 'are', 'is', 'it', 'go', 'up', 'i', 'of']);
/** Phone-level similarity at or above which the free-text reading counts as the command (see bench/asr). */
export const COMMAND_SIMILARITY = 0.3;

/**
 * The grammar's command, or null to use the free-text reading. The command is accepted when the general
 * model heard nothing, shares a content word with it, or sounds like it (phone edit distance).
 */
export function decideCommand(
  command: string,
  freeText: string,
  phonesOf: (text: string) => string[],
): string | null {
  if (!command) return null;
  if (!freeText) return command;
  const heard = new Set(freeText.split(/\s+/));
  if (command.split(/\s+/).some((word) => !STOPWORDS.has(word) && heard.has(word))) return command;
  // Compare the content words only: shared "go to the" must not make "go to the store" sound like "go to sleep".
  const content = (text: string) =>
    text
      .split(/\s+/)
      .filter((word) => word && !STOPWORDS.has(word))
      .join(' ');
  let a = phonesOf(content(freeText));
  let b = phonesOf(content(command));
  if (a.length === 0 || b.length === 0) {
    a = phonesOf(freeText);
    b = phonesOf(command);
  }
  return phoneSimilarity(a, b) >= COMMAND_SIMILARITY ? command : null;
}

/** 1 − edit distance / longer length, over phone sequences. */
export function phoneSimilarity(a: string[], b: string[]): number {
  if (a.length === 0 && b.length === 0) return 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(
        previous[j]! + 1,
        row[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = row;
  }
  return 1 - previous[b.length]! / Math.max(a.length, b.length);
}

function normalise(phrase: string): string {
  return phrase
    .toLowerCase()
    .replace(/[^a-z' ]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}
