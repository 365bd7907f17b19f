import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readdir, rename, rm } from 'node:fs/promises';
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
