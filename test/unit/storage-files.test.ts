// Storage that fails safe (issue 13 item 5), on real files in a temp folder: memory appends are appends and
// rotate at a size cap, damaged state files fall back to their last good copy (kid mode fails safe: ON), symlinks
// out of firmware/ and songs/ are not followed, and a broken calendar feed's reason never quotes the feed.
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryStore, parseTurns } from '../../src/agent/memory.js';
import { AssetError, AssetLibrary } from '../../src/audio/assets.js';
import { encodeWav } from '../../src/audio/wav.js';
import { parseIcs } from '../../src/bridge/calendar/ics.js';
import { readModelOverrides, saveModelOverride } from '../../src/bridge/model-overrides.js';
import { TogglesStore } from '../../src/bridge/toggles-store.js';
import { FirmwareStore } from '../../src/voice/firmware-store.js';
import { readToggles, togglesPath } from '../../src/voice/toggles.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'deskbot-storage-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const AT = new Date(2025, 2, 14, 9, 5); // 2025-03-14 09:05 local time
const logDir = () => join(dir, 'memory');

describe('memory daily logs: appends, with rotation at a size cap', () => {
  it('an entry on a 6 MB daily log is appended in place: same inode, old bytes untouched, new entry at the end', async () => {
    mkdirSync(logDir());
    const path = join(logDir(), '2025-03-14.md');
    const old = `# 2025-03-14\n${'\n## 08:00 · session old\n**User:** filler words\n**Robot:** more filler\n'.repeat(90_000)}`;
    writeFileSync(path, old);
    expect(statSync(path).size).toBeGreaterThan(6_000_000);
    const inode = statSync(path).ino;
    // A cap above the file's size: this is about the append, not rotation (the default cap would rotate it).
    const store = await MemoryStore.open(dir, { maxLogBytes: 16 * 1024 * 1024 });
    await store.logTurn('Where is the wombat?', 'In its burrow.', { sessionId: 'new', at: AT });
    // writeFileAtomic (the old way) renames a new file over the old one: a new inode every time.
    expect(statSync(path).ino).toBe(inode);
    const now = readFileSync(path, 'utf8');
    expect(now.startsWith(old)).toBe(true);
    expect(now.slice(old.length)).toBe(
      '\n## 09:05 · session new\n**User:** Where is the wombat?\n**Robot:** In its burrow.\n',
    );
    expect(store.search('wombat')[0]?.text).toBe('User: Where is the wombat?\nRobot: In its burrow.');
  }, 60_000);

  it('a daily log over maxLogBytes rotates to YYYY-MM-DD.1.md, .2.md…; every turn stays on disk and searchable', async () => {
    const store = await MemoryStore.open(dir, { maxLogBytes: 600 });
    for (let i = 0; i < 12; i++) {
      await store.logTurn(`question number${i} ${'x'.repeat(80)}`, `answer${i}`, {
        sessionId: `s${i}`,
        at: AT,
      });
    }
    const names = readdirSync(logDir()).sort();
    expect(names).toContain('2025-03-14.md');
    expect(names).toContain('2025-03-14.1.md');
    expect(names).toContain('2025-03-14.2.md');
    const turns: string[] = [];
    for (const name of names) {
      const content = readFileSync(join(logDir(), name), 'utf8');
      expect(Buffer.byteLength(content), name).toBeLessThanOrEqual(600);
      expect(content.startsWith('# 2025-03-14\n'), name).toBe(true);
      turns.push(...parseTurns(content).map((turn) => turn.text));
    }
    expect(turns).toHaveLength(12);
    // A fresh store (a restart) indexes the rotated parts too.
    const reopened = await MemoryStore.open(dir, { maxLogBytes: 600 });
    for (const i of [0, 5, 11]) expect(reopened.search(`number${i}`)[0]?.text).toContain(`answer${i}`);
  });

  it('remember() appends to MEMORY.md in place and starts a new line after a cut one', async () => {
    const path = join(dir, 'MEMORY.md');
    writeFileSync(path, '# Memory\n- likes tea (2025-01-01)\n- cut li');
    const inode = statSync(path).ino;
    const store = await MemoryStore.open(dir);
    await store.remember('Sam has a cat called Miso', { at: AT });
    expect(statSync(path).ino).toBe(inode);
    expect(readFileSync(path, 'utf8')).toBe(
      '# Memory\n- likes tea (2025-01-01)\n- cut li\n- Sam has a cat called Miso (2025-03-14)\n',
    );
  });
});

describe('toggles.json damaged: last good copy, else kid mode ON', () => {
  const DAMAGED = [
    ['truncated', '{\n  "kid_mode": tr'],
    ['empty', ''],
    ['null', 'null'],
    ['a list', '[]'],
    ['kid_mode missing', '{"smart_mode":true}'],
    ['kid_mode not a boolean', '{"kid_mode":"yes","smart_mode":true}'],
  ] as const;

  it.each(DAMAGED)('%s, no copy: kid mode ON, smart mode off, and a log line names the file', (_, text) => {
    mkdirSync(join(dir, 'state'));
    writeFileSync(togglesPath(dir), text);
    const lines: string[] = [];
    expect(readToggles(dir, (line) => lines.push(line))).toEqual({ kid_mode: true, smart_mode: false });
    expect(lines.join('\n')).toContain(togglesPath(dir));
    expect(lines.join('\n')).toMatch(/kid mode is ON/);
  });

  it.each(DAMAGED)(
    '%s after a good write: the store comes back with the last good value (toggles.json.bak)',
    async (_, text) => {
      const store = new TogglesStore(dir);
      await store.set('smart_mode', true);
      await store.set('kid_mode', false);
      expect(JSON.parse(readFileSync(`${togglesPath(dir)}.bak`, 'utf8'))).toEqual({
        kid_mode: false,
        smart_mode: true,
      });
      writeFileSync(togglesPath(dir), text);
      const lines: string[] = [];
      expect(new TogglesStore(dir, (line) => lines.push(line)).get()).toEqual({
        kid_mode: false,
        smart_mode: true,
      });
      expect(lines.join('\n')).toMatch(/damaged .*last good copy .*toggles\.json\.bak/);
    },
  );

  it('no file at all (a fresh install): both off, nothing logged', () => {
    const lines: string[] = [];
    expect(readToggles(dir, (line) => lines.push(line))).toEqual({ kid_mode: false, smart_mode: false });
    expect(lines).toEqual([]);
  });
});

describe('models.json damaged', () => {
  it('falls back to models.json.bak, the last good copy; with no copy to the configured defaults ({})', async () => {
    await saveModelOverride(dir, 'agent', 'model-a');
    await saveModelOverride(dir, 'voice', 'model-v');
    writeFileSync(join(dir, 'state', 'models.json'), '[]');
    const lines: string[] = [];
    expect(readModelOverrides(dir, (line) => lines.push(line))).toEqual({
      agent: 'model-a',
      voice: 'model-v',
    });
    expect(lines.join('\n')).toMatch(/models\.json is damaged/);
    writeFileSync(join(dir, 'state', 'models.json.bak'), '');
    expect(readModelOverrides(dir, () => undefined)).toEqual({});
  });
});

describe('symlinks out of firmware/ and songs/', () => {
  it('firmware: a symlink to a file outside is neither listed nor served; one to a file inside is', () => {
    const outside = join(dir, 'outside-marker.bin');
    writeFileSync(outside, 'SECRET-MARKER');
    const fw = join(dir, 'firmware');
    mkdirSync(fw);
    writeFileSync(join(fw, 'box_1.0.0.bin'), 'real image');
    symlinkSync(outside, join(fw, 'box_9.9.9.bin'));
    symlinkSync('box_1.0.0.bin', join(fw, 'box_1.0.1.bin'));
    const store = new FirmwareStore(fw);
    expect(store.pathOf('box_9.9.9.bin')).toBeUndefined();
    expect(
      store
        .list()
        .map((image) => image.file)
        .sort(),
    ).toEqual(['box_1.0.0.bin', 'box_1.0.1.bin']);
    expect(store.latestFor('box')?.version).toBe('1.0.1');
    expect(readFileSync(store.pathOf('box_1.0.1.bin')!, 'utf8')).toBe('real image');
  });

  it('songs: a symlink to a WAV outside is not an asset (not listed, find → not_found)', async () => {
    const outside = join(dir, 'outside.wav');
    writeFileSync(outside, encodeWav(new Int16Array(1600), 16_000));
    const songs = join(dir, 'songs');
    mkdirSync(songs);
    writeFileSync(join(songs, 'purr.wav'), encodeWav(new Int16Array(1600), 16_000));
    symlinkSync(outside, join(songs, 'leak.wav'));
    const library = new AssetLibrary(songs);
    expect((await library.list()).map((asset) => asset.file)).toEqual(['purr.wav']);
    await expect(library.find('leak')).rejects.toMatchObject({ code: 'not_found' });
    await expect(library.find('purr')).resolves.toMatchObject({ file: 'purr.wav' });
  });

  it('songs: an undecodable file is an AssetError "undecodable"', async () => {
    const songs = join(dir, 'songs');
    mkdirSync(songs);
    writeFileSync(join(songs, 'broken.mp3'), 'this is not audio at all');
    const library = new AssetLibrary(songs);
    const error = await library.decode(await library.find('broken'), 24_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AssetError);
    expect((error as AssetError).code).toBe('undecodable');
  });
});

describe('calendar parse errors never quote the feed', () => {
  it.each([
    ['a line without ":"', 'BEGIN:VCALENDAR\nSECRET-TOKEN-abc123 dinner with Dr Who\nEND:VCALENDAR\n'],
    ['an unclosed quote', 'BEGIN:VCALENDAR\nX-A;P="SECRET-TOKEN-abc123:v\nEND:VCALENDAR\n'],
    ['a component never closed', 'BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:SECRET-TOKEN-abc123\n'],
  ])('%s: the reason says what failed, without the content', (_, text) => {
    let message = '';
    try {
      parseIcs(text);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/^not a valid iCalendar file: \S/);
    expect(message).not.toContain('SECRET');
    expect(message).not.toContain('abc123');
  });
});
