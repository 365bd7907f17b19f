import {
  createDecoder,
  DEFAULT_MODEL_DIR,
  loadDecoder,
  type PocketsphinxDecoder,
} from '../native/pocketsphinx-lib.js';
import {
  RecognitionQueue,
  type RecognitionQueueOptions,
  type RecognitionQueueStats,
} from './recognition-queue.js';
import type { AsrProvider, TranscribeContext } from './types.js';

export interface PocketsphinxOptions {
  modelDir?: string;
  /** Command phrases recognised by the grammar (lowercase words). */
  commands: string[];
  /** Decoders in the pool (`workers`) and the queue's bounds; RECOGNITION_QUEUE_DEFAULTS fills the rest. */
  queue?: Partial<RecognitionQueueOptions>;
}

export interface PocketsphinxStats extends RecognitionQueueStats {
  /** Decoders loaded so far (they load on first need, up to `workers`). */
  decoders: number;
  /** Search passes decoded, all decoders together (a job is one pass, or two with the command grammar). */
  passes: number;
  /** Jobs aborted during their first pass whose second (grammar) pass was skipped. */
  secondPassSkipped: number;
}

/**
 * One utterance is one queue job that runs both passes (general model, then the command grammar) on one
 * decoder of the pool. Cancellation: a job aborted while queued never starts (its promise rejects with an
 * AbortError); a job aborted during its first pass skips the second and resolves with the first pass's text.
 */
export class PocketsphinxAsr implements AsrProvider {
  readonly name = 'pocketsphinx';
  readonly commands: string[];
  private readonly modelDir: string;
  private readonly grammar: string | undefined;
  /** Decoder k serves queue worker k; slot 0 is loaded up front, the others when first needed. */
  private readonly decoders: Array<Promise<PocketsphinxDecoder> | undefined>;
  private readonly loaded: PocketsphinxDecoder[] = [];
  /** Model loads run one at a time (each ≈0.4–0.7 s on a worker thread, ≈90 MB). */
  private loading: Promise<unknown> = Promise.resolve();
  private readonly queue: RecognitionQueue<Int16Array, string>;
  private secondPassSkipped = 0;

  constructor(options: PocketsphinxOptions) {
    this.modelDir = options.modelDir ?? DEFAULT_MODEL_DIR;
    // The first decoder loads synchronously: a missing library or model stops startup, and the dictionary
    // is needed now to filter the command phrases.
    const first = createDecoder(this.modelDir);
    // A word missing from the dictionary would make the whole grammar fail to load.
    this.commands = [...new Set(options.commands.map(normalise))].filter((phrase) =>
      phrase?.split(' ').every((word) => first.phones(word) !== null),
    );
    this.grammar = this.commands.length > 0 ? commandGrammar(this.commands) : undefined;
    if (this.grammar) first.addGrammar('commands', this.grammar);
    this.loaded.push(first);
    this.queue = new RecognitionQueue(
      (pcm, worker, signal) => this.recognize(pcm, worker, signal),
      options.queue,
    );
    this.decoders = Array.from({ length: this.queue.stats().workers }, () => undefined);
    this.decoders[0] = Promise.resolve(first);
  }

  describe(): string {
    const { workers } = this.queue.stats();
    return `pocketsphinx (en-us general model + ${this.commands.length} command phrases, ${workers} decoders)`;
  }

  transcribe(pcm16k: Int16Array, signal: AbortSignal, context?: TranscribeContext): Promise<string> {
    if (pcm16k.length < 1600) return Promise.resolve(''); // under 100 ms: nothing to recognise
    return this.queue.submit(pcm16k, signal, context?.deviceId);
  }

  queueStats(): PocketsphinxStats {
    return {
      ...this.queue.stats(),
      decoders: this.loaded.length,
      passes: this.loaded.reduce((sum, decoder) => sum + decoder.decoded, 0),
      secondPassSkipped: this.secondPassSkipped,
    };
  }

  /** Refuses new and waiting jobs; each decoder is freed once its running job is done. */
  close(): void {
    this.queue.close();
    for (const decoder of this.decoders) void decoder?.then((d) => d.free()).catch(() => undefined);
  }

  private async recognize(pcm: Int16Array, worker: number, signal: AbortSignal): Promise<string> {
    const decoder = await this.decoder(worker);
    // Loading a decoder takes a while: a job cancelled meanwhile still never reaches it.
    if (signal.aborted) throw new DOMException('speech recognition was cancelled', 'AbortError');
    const free = await decoder.decode('_default', pcm);
    if (!this.grammar) return free.text;
    if (signal.aborted) {
      this.secondPassSkipped++;
      return free.text;
    }
    const command = await decoder.decode('commands', pcm);
    const phonesOf = (text: string) =>
      text
        .split(/\s+/)
        .filter(Boolean)
        .flatMap((w) => decoder.phones(w) ?? []);
    return decideCommand(command.text, free.text, phonesOf) ?? free.text;
  }

  private decoder(worker: number): Promise<PocketsphinxDecoder> {
    const existing = this.decoders[worker];
    if (existing) return existing;
    const loading = this.loading.then(async () => {
      const decoder = await loadDecoder(this.modelDir);
      if (this.grammar) decoder.addGrammar('commands', this.grammar);
      this.loaded.push(decoder);
      return decoder;
    });
    this.loading = loading.catch(() => undefined);
    this.decoders[worker] = loading;
    // A failed load (memory) fails this job; the next job on this worker tries again.
    loading.catch(() => {
      if (this.decoders[worker] === loading) this.decoders[worker] = undefined;
    });
    return loading;
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
