import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

const TEMP_NAME = /^\..+\.[0-9a-f]{12}\.tmp$/;

/** Removes temporary files a killed writer left behind (they are never read as content). */
export async function cleanStaleTempFiles(dirs: string[]): Promise<number> {
  let removed = 0;
  for (const dir of dirs) {
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      if (!TEMP_NAME.test(name)) continue;
      await rm(join(dir, name), { force: true });
      removed++;
    }
  }
  return removed;
}

/**
 * Writes a file so that a crash at any moment leaves either the old content or the new, never a mix:
 * write a temporary file in the same folder, fsync it, rename it over the target, fsync the folder.
 * Once it resolves the new content survives a power loss, not only a killed process.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const dir = await makeDir(dirname(path));
  const tmp = await writeTemp(dir, path, data);
  try {
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
  await syncDir(dir);
}

/**
 * Creates a file with its whole content, only if nothing exists at `path` (a hand-made file, even an empty
 * one, always wins). Unlike open(…, 'wx') + write, a crash can never leave the file empty or cut short —
 * which the next start would then take for a deliberate edit. Resolves false when the file already existed.
 */
export async function createFileAtomic(path: string, data: string | Uint8Array): Promise<boolean> {
  const dir = await makeDir(dirname(path));
  const tmp = await writeTemp(dir, path, data);
  try {
    // link() publishes the complete temp file under the real name and, unlike rename(), refuses to replace.
    await link(tmp, path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    // File systems without hard links (FAT, some network shares): claim the name exclusively, then rename the
    // complete content over the empty claim. A crash in between leaves an empty file, as 'wx' alone would.
    if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EMLINK', 'EXDEV'].includes(code ?? '')) throw error;
    const claim = await open(path, 'wx').catch((claimError: NodeJS.ErrnoException) => {
      if (claimError.code === 'EEXIST') return null;
      throw claimError;
    });
    if (!claim) return false;
    await claim.close();
    await rename(tmp, path);
  } finally {
    await rm(tmp, { force: true });
  }
  await syncDir(dir);
  return true;
}

export interface AppendTail {
  /** False when this append creates the file. */
  existed: boolean;
  /** Bytes in the file before this append (0 for a new or empty file). */
  sizeBytes: number;
  /** False when the file ends in a cut line (a crash, a hand edit): the chunk should start a new line. */
  endsWithNewline: boolean;
}

/**
 * Appends to a file in O(1), whatever its size: one write of the whole chunk through an O_APPEND descriptor,
 * then fsync (and fsync of the folder when the file is new). A killed process leaves the whole chunk or none
 * (one write() to a regular file); a power cut can leave a cut last line, which `chunk` sees through
 * `endsWithNewline` next time. Callers serialise appends to one file themselves. Resolves the new size.
 */
export async function appendFileDurable(path: string, chunk: (tail: AppendTail) => string): Promise<number> {
  const dir = await makeDir(dirname(path));
  const existed = await stat(path).then(
    () => true,
    () => false,
  );
  const handle = await open(path, 'a+', 0o644);
  let sizeBytes: number;
  try {
    sizeBytes = (await handle.stat()).size;
    let endsWithNewline = true;
    if (sizeBytes > 0) {
      const last = Buffer.alloc(1);
      await handle.read(last, 0, 1, sizeBytes - 1);
      endsWithNewline = last[0] === 0x0a;
    }
    const data = Buffer.from(chunk({ existed, sizeBytes, endsWithNewline }), 'utf8');
    try {
      for (let done = 0; done < data.length; ) {
        done += (await handle.write(data, done, data.length - done)).bytesWritten;
      }
      await handle.sync();
    } catch (error) {
      // A disk that filled up mid-chunk: take the partial chunk back rather than leave half an entry.
      await handle.truncate(sizeBytes).catch(() => undefined);
      throw error;
    }
    sizeBytes += data.length;
  } finally {
    await handle.close();
  }
  if (!existed) await syncDir(dir);
  return sizeBytes;
}

/** Renames within one folder and fsyncs it, so the new name survives a power loss too. */
export async function renameDurable(from: string, to: string): Promise<void> {
  await rename(from, to);
  await syncDir(dirname(resolve(to)));
}

/** mkdir -p, and fsync the parent of every folder it created: a new folder's name is a write too. */
async function makeDir(path: string): Promise<string> {
  const dir = resolve(path);
  const first = await mkdir(dir, { recursive: true });
  if (first === undefined) return dir;
  const top = dirname(resolve(first));
  const created: string[] = [];
  for (let at = dir; at !== top && at !== dirname(at); at = dirname(at)) created.push(at);
  for (const folder of created.reverse()) await syncDir(dirname(folder));
  return dir;
}

async function writeTemp(dir: string, path: string, data: string | Uint8Array): Promise<string> {
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(tmp, 'w', 0o644);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
  return tmp;
}

/** Best effort: some platforms cannot open or fsync a folder, and the data itself is already synced. */
async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r').catch(() => null);
  if (!handle) return;
  await handle.sync().catch(() => undefined);
  await handle.close();
}
