// writeFileAtomic and createFileAtomic (issue 8, durability): what a crash can leave behind, and which fsyncs
// make an acknowledged write survive a power loss. node:fs/promises is wrapped (calls pass through) so the tests
// can see which folders get fsynced and can take hard links away.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as fsPromises from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanStaleTempFiles, createFileAtomic, writeFileAtomic } from '../../src/util/atomic-file.js';
import { TSX_LOADER } from '../support/bridge.js';

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  return { ...actual, open: vi.fn(actual.open), link: vi.fn(actual.link) };
});
const actualFs = await vi.importActual<typeof import('node:fs/promises')>('node:fs/promises');
const openSpy = vi.mocked(fsPromises.open);
const linkSpy = vi.mocked(fsPromises.link);

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'deskbot-durability-atomic-'));
  openSpy.mockClear();
  linkSpy.mockClear();
});
afterEach(() => {
  linkSpy.mockImplementation(actualFs.link);
  rmSync(dir, { recursive: true, force: true });
});

const tempsIn = (folder: string) => readdirSync(folder).filter((name) => name.endsWith('.tmp'));
/** Folders opened read-only: only syncDir does that. */
const syncedDirs = () =>
  openSpy.mock.calls.filter(([, flags]) => flags === 'r').map(([path]) => String(path));

describe('writeFileAtomic', () => {
  it('fsyncs the file, its folder, and the parent of every folder it had to create', async () => {
    const target = join(dir, 'a', 'b', 'file.json');
    await writeFileAtomic(target, '{"x":1}\n');
    expect(readFileSync(target, 'utf8')).toBe('{"x":1}\n');
    // dir holds the new entry "a", a holds "b", b holds the file: all three must reach the disk.
    expect(syncedDirs()).toEqual([dir, join(dir, 'a'), join(dir, 'a', 'b')]);
    expect(tempsIn(join(dir, 'a', 'b'))).toEqual([]);

    openSpy.mockClear();
    await writeFileAtomic(target, '{"x":2}\n');
    expect(syncedDirs()).toEqual([join(dir, 'a', 'b')]); // folders that already existed: only the file's own
  });
});

describe('createFileAtomic', () => {
  it('creates a missing file whole and reports it; leaves an existing one, even empty, untouched', async () => {
    const target = join(dir, 'new', 'SOUL.md');
    expect(await createFileAtomic(target, 'default soul\n')).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('default soul\n');
    expect(await createFileAtomic(target, 'another default\n')).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('default soul\n');

    const empty = join(dir, 'EMPTY.md');
    writeFileSync(empty, '');
    expect(await createFileAtomic(empty, 'default\n')).toBe(false);
    expect(readFileSync(empty, 'utf8')).toBe('');
    expect(tempsIn(dir)).toEqual([]);
    expect(tempsIn(join(dir, 'new'))).toEqual([]);
  });

  it('of 20 concurrent creators exactly one wins, and the file is its content', async () => {
    const target = join(dir, 'race.md');
    const wins = await Promise.all(
      Array.from({ length: 20 }, (_, i) => createFileAtomic(target, `writer ${i}\n`.repeat(1000))),
    );
    expect(wins.filter(Boolean)).toHaveLength(1);
    expect(readFileSync(target, 'utf8')).toBe(`writer ${wins.indexOf(true)}\n`.repeat(1000));
    expect(tempsIn(dir)).toEqual([]);
  });

  it('works on a file system without hard links (EPERM from link)', async () => {
    linkSpy.mockRejectedValue(Object.assign(new Error('EPERM: operation not permitted'), { code: 'EPERM' }));
    const target = join(dir, 'fat.md');
    expect(await createFileAtomic(target, 'whole\n')).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('whole\n');
    expect(await createFileAtomic(target, 'again\n')).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('whole\n');
    expect(linkSpy).toHaveBeenCalled();
    expect(tempsIn(dir)).toEqual([]);
  });
});

describe('SIGKILL while a child writes 4 MB files', () => {
  const ATOMIC_FILE = new URL('../../src/util/atomic-file.ts', import.meta.url).href;
  /** Each file's content names itself: a file that is not exactly this was cut short. */
  const contentOf = (name: string) => `${name}\n${'y'.repeat(4 * 1024 * 1024)}\n`;

  async function killWriter(body: string, folder: string, delayMs: number): Promise<void> {
    const script = `${folder}.mjs`;
    writeFileSync(
      script,
      `import { createFileAtomic, writeFileAtomic } from ${JSON.stringify(ATOMIC_FILE)};
const folder = process.argv[2];
const contentOf = (name) => name + '\\n' + 'y'.repeat(4 * 1024 * 1024) + '\\n';
process.stdout.write('ready\\n');
for (let i = 0; ; i++) { const name = 'f' + i; const path = folder + '/' + name; ${body} }
`,
    );
    const child: ChildProcess = spawn(process.execPath, ['--import', TSX_LOADER, script, folder], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    child.kill('SIGKILL');
    await exited;
  }

  /** Files under their real names that are not whole. */
  const cutShort = (folder: string) =>
    readdirSync(folder)
      .filter((name) => !name.startsWith('.'))
      .filter((name) => readFileSync(join(folder, name), 'utf8') !== contentOf(name));

  it('createFileAtomic and writeFileAtomic never leave a cut file; cleanStaleTempFiles removes their temps', async () => {
    // open(…, 'wx') + write, which workspace seeding still uses, left a cut file in 1 of 3 such kills.
    for (const [kind, body, delays] of [
      ['createFileAtomic', 'await createFileAtomic(path, contentOf(name));', [60, 170, 330]],
      ['writeFileAtomic', 'await writeFileAtomic(path, contentOf(name));', [120]],
    ] as const) {
      for (const delayMs of delays) {
        const folder = mkdtempSync(join(dir, `${kind}-`));
        await killWriter(body, folder, delayMs);
        expect(cutShort(folder), `${kind} killed after ${delayMs} ms`).toEqual([]);
        await cleanStaleTempFiles([folder]);
        expect(tempsIn(folder)).toEqual([]);
      }
    }
  }, 60_000);
});
