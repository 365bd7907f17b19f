// The robot's long-term memory: plain Markdown files in the agent workspace, plus a keyword index over
// them. Facts are bullet lines of MEMORY.md ("- <fact> (YYYY-MM-DD)"); conversation turns are entries of
// memory/YYYY-MM-DD.md ("## HH:MM · session <id>" then "**User:** …" and "**Robot:** …").
//
// Used by the bridge (remember / memory_log side channel, memory_lookup escalations) and by the agent.
// Search is MiniSearch keyword search (prefix + small fuzzy, facts boosted): it never calls a model.
// The files are the truth: the index is built from them on open/reload and updated in step with every
// write this store makes, so it never holds more than the files do.
// Adding an entry appends it (appendFileDurable: one O_APPEND write, then fsync), so it costs the same on a
// 6 MB daily file as on an empty one; a killed process leaves the whole entry or none. A file that ends
// without a newline (a power cut, hand edits, other tools) gets one before the next entry, so an entry never
// runs into it. A daily log that would grow past maxLogBytes is first rotated to memory/YYYY-MM-DD.N.md
// (N = 1, 2, …; higher is newer) and a fresh file starts: nothing is refused or lost, and rotated files stay
// searchable. MEMORY.md is not rotated: facts are one short line each and the agent reads the file whole.
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import MiniSearch from 'minisearch';
import { appendFileDurable, renameDurable, writeFileAtomic } from '../util/atomic-file.js';
import { DEFAULT_PERSONA, MEMORY_LOG_DIR } from './workspace.js';

export type MemorySource = 'fact' | 'turn';

export interface MemoryHit {
  text: string;
  source: MemorySource;
  /** YYYY-MM-DD; '' for a hand-written fact without a date. */
  date: string;
  score: number;
}

interface MemoryDoc {
  id: string;
  text: string;
  source: MemorySource;
  date: string;
}

/** Longest fact kept (characters). */
export const MAX_FACT_CHARS = 2000;
/** Longest user or robot text kept per logged turn (characters). */
export const MAX_TURN_TEXT_CHARS = 4000;
const MAX_SESSION_ID_CHARS = 100;
const MAX_QUERY_CHARS = 500;
const MAX_LIMIT = 100;
/** Only the newest daily log files are indexed (about three years of daily use). */
const MAX_LOG_FILES = 1000;
/** A daily log past this size is rotated before the next entry (a normal day of talk is well under 1 MB). */
export const DEFAULT_MAX_LOG_BYTES = 4 * 1024 * 1024;
const FACT_BOOST = 2;

const MEMORY_FILE = 'MEMORY.md';
/** memory/YYYY-MM-DD.md, and its rotated parts YYYY-MM-DD.N.md. */
const LOG_FILE = /^(\d{4}-\d{2}-\d{2})(?:\.(\d{1,6}))?\.md$/;
const FACT_LINE = /^\s*[-*]\s+(.*\S)\s*$/;
const TRAILING_DATE = /\s*\((\d{4}-\d{2}-\d{2})\)$/;

/** Words too common to find anything by; dropped from documents and queries alike. */
const STOP_WORDS = new Set(
  (
    'a an and are as at be but by did do does for from had has have he her his how i if in is it its ' +
    'me my of on or our she so that the their them they this to was we were what when where which who ' +
    'why will with you your s t'
  ).split(' '),
);

export interface RememberOptions {
  sessionId?: string;
  at?: Date;
}

export interface MemoryOptions {
  /** Rotate a daily log before an entry would take it past this size (DEFAULT_MAX_LOG_BYTES). */
  maxLogBytes?: number;
}

export interface LogTurnOptions {
  sessionId: string;
  at?: Date;
}

export class MemoryStore {
  private index = newIndex();
  /** Per-file promise chains: read-modify-write of one file never overlaps another on the same file. */
  private readonly chains = new Map<string, Promise<void>>();
  private reloading: Promise<void> | null = null;
  private signature = '';

  private readonly maxLogBytes: number;

  private constructor(
    readonly workspaceDir: string,
    options: MemoryOptions,
  ) {
    this.maxLogBytes = options.maxLogBytes ?? DEFAULT_MAX_LOG_BYTES;
  }

  /** Opens the memory of a workspace folder (which may not exist yet) and indexes what is on disk. */
  static async open(workspaceDir: string, options: MemoryOptions = {}): Promise<MemoryStore> {
    const store = new MemoryStore(workspaceDir, options);
    await store.reload();
    return store;
  }

  /** How many facts and turns the index holds. */
  get size(): number {
    return this.index.documentCount;
  }

  /**
   * Appends "- <fact> (YYYY-MM-DD)" to MEMORY.md, keeping everything already there. The fact is made one
   * line and cut to MAX_FACT_CHARS. Resolves once the file is written and the fact is searchable;
   * resolves false (writing nothing) for an empty fact.
   */
  async remember(fact: string, options: RememberOptions = {}): Promise<boolean> {
    const text = oneLine(fact, MAX_FACT_CHARS);
    if (!text) return false;
    const date = localDate(options.at ?? new Date());
    const path = join(this.workspaceDir, MEMORY_FILE);
    await this.exclusive(path, async () => {
      await appendFileDurable(path, (tail) => {
        // A MEMORY.md that does not exist yet starts from the persona template, as the workspace seeds it.
        const start = !tail.existed
          ? withNewline(DEFAULT_PERSONA['MEMORY.md'])
          : tail.endsWithNewline
            ? ''
            : '\n';
        return `${start}- ${text} (${date})\n`;
      });
      this.add({ id: factId(text, date), text, source: 'fact', date });
    });
    return true;
  }

  /**
   * Overwrites MEMORY.md with `content` (the persona admin route) and reindexes. It must come through here:
   * an overwrite outside this store can land while remember() holds the old text, and remember() then
   * writes that old text back with its fact appended, silently undoing an overwrite that was acknowledged.
   */
  async replaceMemoryFile(content: string): Promise<void> {
    const path = join(this.workspaceDir, MEMORY_FILE);
    await this.exclusive(path, () => writeFileAtomic(path, content));
    await this.reload();
  }

  /**
   * Appends one conversation turn to memory/YYYY-MM-DD.md (the local date of `at`). Texts are made one
   * line and cut to MAX_TURN_TEXT_CHARS each. Resolves once written and searchable; false when both
   * texts are empty.
   */
  async logTurn(user: string, assistant: string, options: LogTurnOptions): Promise<boolean> {
    const userText = oneLine(user, MAX_TURN_TEXT_CHARS);
    const robotText = oneLine(assistant, MAX_TURN_TEXT_CHARS);
    if (!userText && !robotText) return false;
    const at = options.at ?? new Date();
    const date = localDate(at);
    const session = oneLine(options.sessionId, MAX_SESSION_ID_CHARS) || 'unknown';
    const heading = `## ${localTime(at)} · session ${session}`;
    const path = join(this.workspaceDir, MEMORY_LOG_DIR, `${date}.md`);
    await this.exclusive(path, async () => {
      const entry = `${heading}\n**User:** ${userText}\n**Robot:** ${robotText}\n`;
      await this.rotateIfFull(path, date, Buffer.byteLength(entry) + 2);
      await appendFileDurable(path, (tail) => {
        const start = tail.sizeBytes === 0 ? `# ${date}\n` : tail.endsWithNewline ? '' : '\n';
        return `${start}\n${entry}`;
      });
      this.add({
        id: turnId(date, heading, turnText(userText, robotText)),
        ...turnDoc(date, userText, robotText),
      });
    });
    return true;
  }

  /**
   * Keyword search over facts and turns: prefix matching, a small fuzzy allowance, facts ranked above
   * turns with the same match. At most `limit` hits, best first; [] when nothing matches.
   */
  search(query: string, limit = 5): MemoryHit[] {
    const max = Math.min(Math.floor(limit), MAX_LIMIT);
    if (!(max > 0)) return [];
    const results = this.index.search(query.slice(0, MAX_QUERY_CHARS), {
      prefix: (term) => term.length >= 3,
      fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
      maxFuzzy: 2,
      boostDocument: (_id, _term, stored) => (stored?.source === 'fact' ? FACT_BOOST : 1),
    });
    return results.slice(0, max).map((result) => ({
      text: String(result.text),
      source: result.source as MemorySource,
      date: String(result.date),
      score: result.score,
    }));
  }

  /** Every fact of MEMORY.md in file order (for prompts and admin views). */
  async facts(): Promise<Array<{ text: string; date: string }>> {
    const content = await readOr(join(this.workspaceDir, MEMORY_FILE), '');
    return parseFacts(content).map(({ text, date }) => ({ text, date }));
  }

  /**
   * Re-reads every file and rebuilds the index (after hand edits, the persona admin route, or another
   * process writing). Waits for this store's writes in progress; writes started meanwhile wait for it.
   */
  async reload(): Promise<void> {
    while (this.reloading) await this.reloading.catch(() => undefined);
    const job = (async () => {
      await Promise.all(this.chains.values());
      const [docs, signature] = await Promise.all([this.readAll(), this.diskSignature()]);
      const index = newIndex();
      for (const doc of docs) if (!index.has(doc.id)) index.add(doc);
      this.index = index;
      this.signature = signature;
    })();
    this.reloading = job;
    try {
      await job;
    } finally {
      if (this.reloading === job) this.reloading = null;
    }
  }

  /**
   * Reloads only when a memory file changed on disk (name, size or modification time) since the last
   * load — cheap enough to call before every agent turn to see what another process wrote.
   */
  async refresh(): Promise<boolean> {
    if ((await this.diskSignature()) === this.signature) return false;
    await this.reload();
    return true;
  }

  /**
   * Moves a daily log that `addBytes` more would take past maxLogBytes to the next free YYYY-MM-DD.N.md.
   * Turn ids depend on the date, not the file name, so the index stays as it is.
   */
  private async rotateIfFull(path: string, date: string, addBytes: number): Promise<void> {
    const size = (await stat(path).catch(() => null))?.size ?? 0;
    if (size === 0 || size + addBytes <= this.maxLogBytes) return;
    const names = new Set(await this.logFiles());
    let part = 1;
    while (names.has(`${date}.${part}.md`)) part++;
    await renameDurable(path, join(this.workspaceDir, MEMORY_LOG_DIR, `${date}.${part}.md`));
  }

  private add(doc: MemoryDoc): void {
    if (!this.index.has(doc.id)) this.index.add(doc);
  }

  private async exclusive(path: string, task: () => Promise<void>): Promise<void> {
    while (this.reloading) await this.reloading.catch(() => undefined);
    const run = (this.chains.get(path) ?? Promise.resolve()).then(task);
    const tail = run.catch(() => undefined);
    this.chains.set(path, tail);
    void tail.then(() => {
      if (this.chains.get(path) === tail) this.chains.delete(path);
    });
    await run;
  }

  private async readAll(): Promise<MemoryDoc[]> {
    const docs: MemoryDoc[] = parseFacts(await readOr(join(this.workspaceDir, MEMORY_FILE), '')).map(
      ({ text, date }) => ({ id: factId(text, date), text, source: 'fact', date }),
    );
    for (const name of await this.logFiles()) {
      const date = LOG_FILE.exec(name)![1]!;
      const content = await readOr(join(this.workspaceDir, MEMORY_LOG_DIR, name), '');
      for (const entry of parseTurns(content)) {
        docs.push({ id: turnId(date, entry.heading, entry.text), text: entry.text, source: 'turn', date });
      }
    }
    return docs;
  }

  private async logFiles(): Promise<string[]> {
    const names = await readdir(join(this.workspaceDir, MEMORY_LOG_DIR)).catch(() => [] as string[]);
    return names
      .filter((name) => LOG_FILE.test(name))
      .sort()
      .slice(-MAX_LOG_FILES);
  }

  private async diskSignature(): Promise<string> {
    const paths = [
      join(this.workspaceDir, MEMORY_FILE),
      ...(await this.logFiles()).map((name) => join(this.workspaceDir, MEMORY_LOG_DIR, name)),
    ];
    const parts = await Promise.all(
      paths.map(async (path) => {
        const info = await stat(path).catch(() => null);
        return info ? `${path}:${info.size}:${info.mtimeMs}` : `${path}:-`;
      }),
    );
    return parts.join('|');
  }
}

function newIndex(): MiniSearch<MemoryDoc> {
  return new MiniSearch<MemoryDoc>({
    fields: ['text'],
    storeFields: ['text', 'source', 'date'],
    processTerm: (term) => {
      const lower = term.toLowerCase();
      return STOP_WORDS.has(lower) ? null : lower;
    },
  });
}

/** Bullet lines of MEMORY.md; a trailing "(YYYY-MM-DD)" is the date the fact was learned. */
export function parseFacts(content: string): Array<{ text: string; date: string }> {
  const facts: Array<{ text: string; date: string }> = [];
  for (const line of content.split(/\r?\n/)) {
    const match = FACT_LINE.exec(line);
    if (!match) continue;
    let text = match[1]!;
    const dated = TRAILING_DATE.exec(text);
    const date = dated ? dated[1]! : '';
    if (dated) text = text.slice(0, dated.index).trim();
    text = text.slice(0, MAX_FACT_CHARS);
    if (text) facts.push({ text, date });
  }
  return facts;
}

/** Entries of a daily log: each "## …" heading and the lines under it, as "User: …\nRobot: …". */
export function parseTurns(content: string): Array<{ heading: string; text: string }> {
  const entries: Array<{ heading: string; lines: string[] }> = [];
  for (const line of content.split(/\r?\n/)) {
    if (/^##\s/.test(line)) entries.push({ heading: line.trim(), lines: [] });
    else if (/^#\s/.test(line)) continue;
    else entries[entries.length - 1]?.lines.push(line);
  }
  const turns: Array<{ heading: string; text: string }> = [];
  for (const { heading, lines } of entries) {
    let user = '';
    let robot = '';
    const other: string[] = [];
    for (const line of lines) {
      const labelled = /^\s*\*\*(User|Robot):\*\*\s*(.*)$/.exec(line);
      if (labelled?.[1] === 'User') user = labelled[2]!.trim();
      else if (labelled?.[1] === 'Robot') robot = labelled[2]!.trim();
      else if (line.trim()) other.push(line.replaceAll('**', '').trim());
    }
    const text = (user || robot ? turnText(user, robot) : other.join('\n')).slice(
      0,
      2 * MAX_TURN_TEXT_CHARS + 20,
    );
    if (text.trim()) turns.push({ heading, text });
  }
  return turns;
}

function turnText(user: string, robot: string): string {
  return `User: ${user}\nRobot: ${robot}`;
}

function turnDoc(date: string, user: string, robot: string): Omit<MemoryDoc, 'id'> {
  return { text: turnText(user, robot), source: 'turn', date };
}

function factId(text: string, date: string): string {
  return `fact:${hash(`${date}\n${text}`)}`;
}

function turnId(date: string, heading: string, text: string): string {
  return `turn:${hash(`${date}\n${heading}\n${text}`)}`;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}

/** Collapses all whitespace (so a text can never start a new fact or heading) and cuts to `max`. */
function oneLine(text: string, max: number): string {
  return String(text ?? '')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, max)
    .trim();
}

function withNewline(text: string): string {
  return text === '' || text.endsWith('\n') ? text : `${text}\n`;
}

async function readOr(path: string, fallback: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return fallback;
    throw error;
  }
}

const pad = (n: number) => String(n).padStart(2, '0');

export function localDate(at: Date): string {
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}`;
}

function localTime(at: Date): string {
  return `${pad(at.getHours())}:${pad(at.getMinutes())}`;
}
