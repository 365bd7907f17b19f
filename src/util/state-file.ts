// Small JSON state files under DATA_DIR/state (toggles, model overrides) that must survive damage: every
// successful write also leaves `<file>.bak`, the last good copy, and a read that finds the file damaged (cut
// short, empty, `null`, `[]`, a wrong type) says so in the log and falls back to that copy. What to do when
// neither is readable is the caller's decision (kid mode fails safe: on).
import { existsSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from './atomic-file.js';

export type StateRead<T> =
  | { value: T; from: 'file' | 'backup' }
  | { value: undefined; from: 'missing' | 'damaged' };

/** Turns parsed JSON into the state, or undefined when it is not a valid state. */
export type StateParser<T> = (raw: unknown) => T | undefined;

export const backupPathOf = (path: string) => `${path}.bak`;

/** Prints to stderr: for callers without a logger (the voice server reads toggles before its logger exists). */
export const warnOnStderr = (line: string) => console.warn(`deskbot: ${line}`);

/** Reads a state file, falling back to its last good copy; a damaged file is reported through `warn`. */
export function readStateFile<T>(
  path: string,
  parse: StateParser<T>,
  warn: (line: string) => void,
): StateRead<T> {
  const main = readParsed(path, parse);
  if (main.ok) return { value: main.value, from: 'file' };
  const backup = readParsed(backupPathOf(path), parse);
  if (main.reason === 'missing' && !backup.ok && backup.reason === 'missing') {
    return { value: undefined, from: 'missing' };
  }
  const what = main.reason === 'missing' ? 'is missing' : `is damaged (${main.reason})`;
  if (backup.ok) {
    warn(`state file ${path} ${what}; using the last good copy ${backupPathOf(path)}`);
    return { value: backup.value, from: 'backup' };
  }
  warn(`state file ${path} ${what} and there is no good copy (${backupPathOf(path)}: ${backup.reason})`);
  return { value: undefined, from: 'damaged' };
}

/**
 * Writes the state atomically, then the same content as the last good copy. A crash between the two leaves the
 * new file and the previous copy: both whole, and the file (newest) is what a read uses.
 */
export async function writeStateFile(path: string, value: unknown): Promise<void> {
  const text = `${JSON.stringify(value, null, 2)}\n`;
  await writeFileAtomic(path, text);
  await writeFileAtomic(backupPathOf(path), text);
}

type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

function readParsed<T>(path: string, parse: StateParser<T>): Parsed<T> {
  if (!existsSync(path)) return { ok: false, reason: 'missing' };
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return { ok: false, reason: `cannot read: ${(error as NodeJS.ErrnoException).code ?? 'error'}` };
  }
  if (text.trim() === '') return { ok: false, reason: 'empty' };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'not valid JSON' };
  }
  const value = parse(raw);
  return value === undefined ? { ok: false, reason: 'not the expected fields' } : { ok: true, value };
}
