// What the sherpa-onnx ASR and TTS providers share: loading the optional native package, reading model
// folders, and the checks that keep a damaged model from taking the process down.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fetchCommand } from '../../models/catalog.js';

/**
 * Imports the optional native package (its ESM namespace holds the CommonJS exports under default) and
 * checks that `ready(module)` holds, so an old version fails with a clear message.
 */
export async function importSherpa<T>(
  role: 'ASR' | 'TTS',
  ready: (module: T) => boolean,
  need: string,
): Promise<T> {
  const specifier = 'sherpa-onnx-node'; // not a literal import: the package is optional and untyped
  let namespace: { default?: T } & Partial<T>;
  try {
    namespace = await import(specifier);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new Error(
        `sherpa ${role} needs the npm package sherpa-onnx-node: npm install sherpa-onnx-node@^1.13`,
        {
          cause: error,
        },
      );
    }
    throw new Error(`sherpa-onnx-node failed to load: ${(error as Error).message}`, { cause: error });
  }
  const sherpa = namespace.default ?? (namespace as T);
  if (!ready(sherpa)) throw new Error(`sherpa-onnx-node is too old: ${need} is missing (need >= 1.13)`);
  return sherpa;
}

/**
 * Why `path` is not a token table ("<symbol> <id>" per line), or undefined when it looks fine. sherpa-onnx
 * ends the whole process on a malformed table instead of failing the load, so it is checked here.
 */
export function tokenTableProblem(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return `cannot read ${path}: ${(error as Error).message}`;
  }
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, '');
    if (line.trim() && !/(^|\s)-?\d+\s*$/.test(line)) {
      return `${path} line ${i + 1} is not "<symbol> <id>": ${JSON.stringify(line.slice(0, 60))}`;
    }
  }
  return undefined;
}

/** Files and sub-folders of a model folder (empty sets when it does not exist). */
export function listEntries(dir: string): { files: Set<string>; dirs: Set<string> } {
  const files = new Set<string>();
  const dirs = new Set<string>();
  try {
    for (const name of readdirSync(dir)) {
      const stat = statSync(join(dir, name));
      if (stat.isDirectory()) dirs.add(name);
      else if (stat.isFile()) files.add(name);
    }
  } catch {
    // a missing folder has no files
  }
  return { files, dirs };
}

/** The error for a missing or incomplete model folder: what is missing and the command that fetches it. */
export function missingModelError(
  role: 'ASR' | 'TTS',
  what: string,
  catalogName: string,
  dir: string,
  missing: string[],
  alternative = '',
): Error {
  const where = existsSync(dir) ? `in ${dir}` : `(${dir} does not exist)`;
  return new Error(
    `sherpa ${role}: no ${what} ${where}; missing ${missing.join(', ')}. ` +
      `Install it with: ${fetchCommand(catalogName)}${alternative} ` +
      `(needs internet; it unpacks into <data_dir>/models/${catalogName}), ` +
      'or point the model folder setting at a folder that holds these files.',
  );
}
