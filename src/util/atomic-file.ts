import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

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
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(tmp, 'w', 0o644);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
  const dirHandle = await open(dir, 'r').catch(() => null);
  if (dirHandle) {
    await dirHandle.sync().catch(() => undefined);
    await dirHandle.close();
  }
}
