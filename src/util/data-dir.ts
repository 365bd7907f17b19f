// DATA_DIR safety: what a storage failure means for a caller (507 and one clear line instead of a stack trace),
// the start-up check that the folder can be written at all, and names that must not lead out of a folder.
import { randomBytes } from 'node:crypto';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { mkdir, open, realpath, rm, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';

export interface StorageProblem {
  status: number;
  code: 'storage_full' | 'storage_read_only';
  /** What is wrong, e.g. "the data directory is full (ENOSPC)". */
  condition: string;
  /** For an HTTP caller: the condition and that the change was not saved. */
  message: string;
}

/**
 * The storage failure behind an error, or undefined when it is something else. ENOSPC/EDQUOT (disk or quota full)
 * and EROFS (read-only mount) are the operator's to fix, not bugs: 507 Insufficient Storage says so to the caller.
 */
export function storageProblem(error: unknown): StorageProblem | undefined {
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  const code =
    errno === 'ENOSPC' || errno === 'EDQUOT'
      ? 'storage_full'
      : errno === 'EROFS'
        ? 'storage_read_only'
        : undefined;
  if (!code) return undefined;
  const condition = `the data directory is ${code === 'storage_full' ? 'full' : 'read-only'} (${errno})`;
  return { status: 507, code, condition, message: `${condition}; the change was not saved` };
}

/** Bytes the start-up probe writes: enough that a full disk refuses it (an empty file needs no data block). */
const PROBE_BYTES = 4096;

/**
 * Start-up check that DATA_DIR can hold state: creates it, writes and fsyncs a small file, removes it. Resolves
 * undefined when it can, else one sentence saying what is wrong and what to do — never a stack trace.
 */
export async function checkDataDir(dir: string): Promise<string | undefined> {
  const where = resolve(dir);
  const probe = join(where, `.deskbot-probe.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await makeDir(where);
    const handle = await open(probe, 'wx', 0o600);
    try {
      await handle.writeFile(Buffer.alloc(PROBE_BYTES));
      await handle.sync();
    } finally {
      await handle.close();
    }
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    const what =
      code === 'ENOSPC' || code === 'EDQUOT'
        ? 'is full'
        : code === 'EROFS'
          ? 'is on a read-only file system'
          : code === 'EACCES' || code === 'EPERM'
            ? 'is not writable by this user'
            : 'cannot be written';
    return `data directory ${where} ${what} (${code}); free space or point DATA_DIR at a writable folder`;
  } finally {
    await rm(probe, { force: true }).catch(() => undefined);
  }
}

/**
 * mkdir -p with the real reason on failure: a recursive mkdir under a read-only mount reports ENOENT for the
 * missing folder rather than EROFS, so retry the topmost missing folder alone to learn why.
 */
async function makeDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    let missing = dir;
    while (dirname(missing) !== missing && !existsSync(dirname(missing))) missing = dirname(missing);
    await mkdir(missing);
    throw error;
  }
}

/**
 * The path and size of `name` inside `dir` when it is a regular file that stays inside `dir` once symlinks are
 * resolved, else undefined. A symlink in firmware/ or songs/ to /etc/… must not be served; one to another file of
 * the same folder is harmless. `name` must already be a plain file name (callers check their own patterns).
 */
export async function fileInside(dir: string, name: string): Promise<ContainedFile | undefined> {
  try {
    const [root, real] = await Promise.all([realpath(dir), realpath(join(dir, name))]);
    if (!isInside(root, real)) return undefined;
    const info = await stat(real);
    return info.isFile() ? { path: real, bytes: info.size, mtimeMs: info.mtimeMs } : undefined;
  } catch {
    return undefined;
  }
}

/** fileInside for synchronous callers (the firmware store answers OTA checks synchronously). */
export function fileInsideSync(dir: string, name: string): ContainedFile | undefined {
  try {
    const real = realpathSync(join(dir, name));
    if (!isInside(realpathSync(dir), real)) return undefined;
    const info = statSync(real);
    return info.isFile() ? { path: real, bytes: info.size, mtimeMs: info.mtimeMs } : undefined;
  } catch {
    return undefined;
  }
}

export interface ContainedFile {
  /** The resolved path (symlinks followed), so a later swap of the link cannot redirect the read. */
  path: string;
  bytes: number;
  mtimeMs: number;
}

function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}
