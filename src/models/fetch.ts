// `deskbot models fetch <name>`: download an official sherpa-onnx release archive, unpack it with the
// system tar (bzip2), check the files the providers need, and move the folder into <destDir>/<name>
// with one rename. Everything happens in a hidden work folder inside destDir (same filesystem, so the
// rename is atomic); a failure at any step leaves nothing at <destDir>/<name>.
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { findModel, MODEL_CATALOG, type ModelEntry, modelNames } from './catalog.js';

export interface FetchModelOptions {
  /** Defaults to the global fetch. */
  fetchImpl?: typeof fetch;
  /** Progress lines for a human; defaults to silent. */
  log?: (message: string) => void;
  signal?: AbortSignal;
  /** Replace an installed copy even if it is complete. */
  force?: boolean;
}

export function listModels(): ModelEntry[] {
  return [...MODEL_CATALOG.values()];
}

/** Where a catalogue model lives: <dataDir>/models/<name>. */
export function modelDir(name: string, dataDir: string): string {
  return join(dataDir, 'models', name);
}

/** The required files of `entry` that are absent from `dir` (directories are listed with a trailing "/"). */
export function missingModelFiles(entry: ModelEntry, dir: string): string[] {
  return entry.files.filter((file) => {
    const path = join(dir, file);
    if (!existsSync(path)) return true;
    return file.endsWith('/') ? !statSync(path).isDirectory() : !statSync(path).isFile();
  });
}

export function isModelInstalled(name: string, dataDir: string): boolean {
  const entry = findModel(name);
  const dir = modelDir(name, dataDir);
  return entry !== undefined && existsSync(dir) && missingModelFiles(entry, dir).length === 0;
}

/**
 * Installs catalogue model `name` as <destDir>/<name> and returns that path. An already complete copy is
 * kept (unless `force`); an incomplete one is replaced once the new copy has been verified.
 */
export async function fetchModel(
  name: string,
  destDir: string,
  options: FetchModelOptions = {},
): Promise<string> {
  const entry = findModel(name);
  if (!entry) {
    throw new Error(`unknown model "${name}"; known models: ${modelNames().join(', ')}`);
  }
  const log = options.log ?? (() => undefined);
  const root = resolve(destDir);
  const target = join(root, name);
  if (!options.force && existsSync(target) && missingModelFiles(entry, target).length === 0) {
    log(`${name} is already installed in ${target}`);
    return target;
  }

  await mkdir(root, { recursive: true });
  const work = await mkdtemp(join(root, `.fetch-${name}-`));
  try {
    const archive = join(work, basename(new URL(entry.url).pathname));
    await download(entry, target, archive, options, log);

    log(`unpacking ${basename(archive)}`);
    const unpacked = join(work, 'unpacked');
    await mkdir(unpacked);
    await untarBz2(archive, unpacked);
    await rm(archive, { force: true });

    const folder = await locateFolder(entry, unpacked);
    const missing = missingModelFiles(entry, folder);
    if (missing.length > 0) {
      throw new Error(
        `the archive ${entry.url} unpacked, but ${name} is missing: ${missing.join(', ')} ` +
          '(the release may have changed; nothing was installed)',
      );
    }

    if (existsSync(target)) {
      // An incomplete or forced-over copy: move it aside first (rename cannot replace a non-empty folder).
      await rename(target, join(work, 'previous'));
    }
    await rename(folder, target);
    log(`installed ${name} in ${target}`);
    return target;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function download(
  entry: ModelEntry,
  target: string,
  file: string,
  options: FetchModelOptions,
  log: (message: string) => void,
): Promise<void> {
  const fetchImpl = options.fetchImpl ?? fetch;
  log(`downloading ${entry.name} from ${entry.url}`);
  let response: Response;
  try {
    response = await fetchImpl(entry.url, { redirect: 'follow', signal: options.signal });
  } catch (error) {
    if (options.signal?.aborted) throw error;
    throw unreachable(entry, target, error);
  }
  if (!response.ok) {
    throw new Error(
      `download of ${entry.name} failed: HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''} from ${entry.url}`,
    );
  }
  if (!response.body) throw new Error(`download of ${entry.name} failed: empty response from ${entry.url}`);

  const total = Number(response.headers.get('content-length')) || 0;
  let received = 0;
  let nextReport = 0.1;
  async function* counted(source: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
    for await (const chunk of source) {
      received += chunk.length;
      if (total > 0 && received / total >= nextReport) {
        log(`  ${Math.floor((received / total) * 100)}% of ${mb(total)}`);
        while (received / total >= nextReport) nextReport += 0.1;
      }
      yield chunk;
    }
  }
  try {
    await pipeline(
      Readable.fromWeb(response.body as unknown as WebReadableStream<Uint8Array>),
      counted,
      createWriteStream(file),
    );
  } catch (error) {
    if (options.signal?.aborted) throw error;
    throw new Error(
      `download of ${entry.name} from ${entry.url} broke off after ${mb(received)}: ${describeError(error)}`,
    );
  }
  if (total > 0 && received !== total) {
    throw new Error(
      `download of ${entry.name} is incomplete: ${received} of ${total} bytes from ${entry.url}`,
    );
  }
  log(`  downloaded ${mb(received)}`);
}

/** The "no network" error: what failed, and how to install the model by hand from another machine. */
function unreachable(entry: ModelEntry, target: string, error: unknown): Error {
  const host = new URL(entry.url).host;
  const archive = basename(new URL(entry.url).pathname);
  return new Error(
    [
      `cannot download ${entry.name}: this machine cannot reach ${host} (${describeError(error)}); a proxy or firewall may block it.`,
      'To install it by hand, on a machine with internet run:',
      `  curl -LO ${entry.url}`,
      `  tar -xjf ${archive}`,
      `then copy the folder ${entry.folder} to this machine as ${target}`,
      `(for example: scp -r ${entry.folder} <this-host>:${target}); it must contain ${entry.files.join(', ')}.`,
    ].join('\n'),
    { cause: error },
  );
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: string; message?: string } | undefined;
  if (cause?.message) return `${error.message}: ${cause.message}`;
  if (cause?.code) return `${error.message}: ${cause.code}`;
  return error.message;
}

function mb(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}

/** `tar -xjf archive -C dir` (no shell); bzip2 must be installed for -j. */
function untarBz2(archive: string, dir: string): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn('tar', ['-xjf', archive, '-C', dir, '--no-same-owner'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      if (stderr.length < 4000) stderr += text;
    });
    child.on('error', (error: NodeJS.ErrnoException) => {
      reject(
        error.code === 'ENOENT'
          ? new Error('cannot unpack the model: the "tar" command is not installed (install tar and bzip2)')
          : error,
      );
    });
    child.on('close', (code, signal) => {
      if (code === 0) resolvePromise();
      else
        reject(
          new Error(
            `cannot unpack ${basename(archive)}: tar -xjf exited with ${code ?? signal}` +
              (stderr.trim() ? `: ${stderr.trim()}` : '') +
              (/bzip2/i.test(stderr) ? ' (is bzip2 installed?)' : ''),
          ),
        );
    });
  });
}

/** The unpacked model folder: the expected one, else the single top-level folder, else the root itself. */
async function locateFolder(entry: ModelEntry, unpacked: string): Promise<string> {
  const expected = join(unpacked, entry.folder);
  if (existsSync(expected)) return expected;
  const top = await readdir(unpacked, { withFileTypes: true });
  const dirs = top.filter((d) => d.isDirectory());
  if (dirs.length === 1 && top.length === 1) return join(unpacked, dirs[0]!.name);
  return unpacked;
}
