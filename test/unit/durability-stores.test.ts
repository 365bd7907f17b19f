// MemoryStore and TogglesStore after a crash or a race (issue 8, durability): hand-made torn files are read and
// repaired by the next write, and an overwrite of MEMORY.md is never undone by a fact being appended.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryStore, parseFacts, parseTurns } from '../../src/agent/memory.js';
import { seedWorkspace } from '../../src/agent/workspace.js';
import { TogglesStore } from '../../src/bridge/toggles-store.js';
import { togglesPath } from '../../src/voice/toggles.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'deskbot-durability-stores-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const AT = new Date(2025, 2, 14, 9, 5); // 2025-03-14 09:05 local time
const read = (...parts: string[]) => readFileSync(join(dir, ...parts), 'utf8');
const noTemps = (...parts: string[]) =>
  expect(readdirSync(join(dir, ...parts)).filter((name) => name.endsWith('.tmp'))).toEqual([]);

describe('MemoryStore and torn files', () => {
  it('a MEMORY.md ending in a cut line: read as it is, and the next fact starts on a line of its own', async () => {
    const torn = '# Memory\n\n- Alice loves strawberries (2025-03-01)\n- Bob plays the ce';
    writeFileSync(join(dir, 'MEMORY.md'), torn);
    const store = await MemoryStore.open(dir);
    expect(store.search('strawberries')[0]?.text).toBe('Alice loves strawberries');

    await store.remember('Carol keeps bees', { at: AT });
    expect(read('MEMORY.md')).toBe(`${torn}\n- Carol keeps bees (2025-03-14)\n`);
    expect(parseFacts(read('MEMORY.md')).map((fact) => fact.text)).toEqual([
      'Alice loves strawberries',
      'Bob plays the ce',
      'Carol keeps bees',
    ]);
    expect(store.search('bees')[0]?.text).toBe('Carol keeps bees');
    noTemps();
  });

  it('a daily log cut inside an entry: the partial turn is kept, the next turn is a whole entry after it', async () => {
    mkdirSync(join(dir, 'memory'));
    const torn = '# 2025-03-14\n\n## 09:01 · session a\n**User:** what is a plat';
    writeFileSync(join(dir, 'memory', '2025-03-14.md'), torn);
    const store = await MemoryStore.open(dir);
    expect(store.search('plat')[0]?.text).toBe('User: what is a plat\nRobot: ');

    await store.logTurn('What is a wombat?', '😮 A burrowing marsupial.', { sessionId: 'b', at: AT });
    const file = read('memory', '2025-03-14.md');
    expect(file).toBe(
      `${torn}\n\n## 09:05 · session b\n**User:** What is a wombat?\n**Robot:** 😮 A burrowing marsupial.\n`,
    );
    expect(parseTurns(file).map((turn) => turn.text)).toEqual([
      'User: what is a plat\nRobot: ',
      'User: What is a wombat?\nRobot: 😮 A burrowing marsupial.',
    ]);
    expect(store.search('wombat')[0]?.text).toContain('burrowing marsupial');
    noTemps('memory');
  });
});

describe('MemoryStore.replaceMemoryFile', () => {
  it('runs in turn with remember: facts queued before it are replaced, facts queued after it are kept', async () => {
    await seedWorkspace(dir);
    const store = await MemoryStore.open(dir);
    const replacement = '# Memory\n\n- The owner plays the cello (2025-01-01)\n';
    const before = store.remember('Dave likes kites', { at: AT });
    const replaced = store.replaceMemoryFile(replacement);
    const after = store.remember('Erin collects stamps', { at: AT });
    await Promise.all([before, replaced, after]);

    expect(read('MEMORY.md')).toBe(`${replacement}- Erin collects stamps (2025-03-14)\n`);
    expect(store.search('cello')[0]?.text).toBe('The owner plays the cello');
    expect(store.search('stamps')[0]?.text).toBe('Erin collects stamps');
    expect(store.search('kites')).toEqual([]);
  });

  it('an acknowledged overwrite survives 40 facts remembered around it (writeFileAtomic alone lost it)', async () => {
    await seedWorkspace(dir);
    const store = await MemoryStore.open(dir);
    const replacement = `# Memory\n\n<!-- overwritten -->\n${'x'.repeat(100_000)}\n`;
    const early = Array.from({ length: 20 }, (_, i) => store.remember(`early fact ${i}`, { at: AT }));
    const late = Array.from({ length: 20 }, (_, i) =>
      new Promise((resolve) => setTimeout(resolve, i)).then(() =>
        store.remember(`late fact ${i}`, { at: AT }),
      ),
    );
    await store.replaceMemoryFile(replacement);
    // Once acknowledged, every later state of the file begins with the overwrite.
    expect(read('MEMORY.md').startsWith(replacement)).toBe(true);
    await Promise.all([...early, ...late]);
    expect(read('MEMORY.md').startsWith(replacement)).toBe(true);
    const kept = parseFacts(read('MEMORY.md')).map((fact) => fact.text);
    expect(kept.length).toBeGreaterThan(0); // the late ones, appended after the overwrite
    expect(kept.every((text) => text.startsWith('late fact'))).toBe(true);
    expect(store.size).toBe(kept.length); // the index holds what the file holds, no more
    noTemps();
  });
});

describe('TogglesStore after a crash', () => {
  it('a torn toggles.json (not written by it, no last good copy) reads as kid mode ON (fail safe); the next change rewrites it whole', async () => {
    mkdirSync(join(dir, 'state'));
    writeFileSync(togglesPath(dir), '{\n  "kid_mode": tr');
    const store = new TogglesStore(dir, () => undefined);
    expect(store.get()).toEqual({ kid_mode: true, smart_mode: false });
    await store.set('smart_mode', true);
    expect(JSON.parse(read('state', 'toggles.json'))).toEqual({ kid_mode: true, smart_mode: true });
    noTemps('state');
  });

  it('a value it acknowledged is what a new store (a restarted bridge) reads', async () => {
    const store = new TogglesStore(dir);
    const changes = [true, false, true, true, false].map((enabled, i) =>
      store.set(i % 2 ? 'smart_mode' : 'kid_mode', enabled),
    );
    const last = await Promise.all(changes);
    expect(new TogglesStore(dir).get()).toEqual(last.at(-1));
    expect(new TogglesStore(dir).get()).toEqual({ kid_mode: false, smart_mode: true });
    // A leftover temp file from a killed writer is never read as the toggles.
    writeFileSync(join(dir, 'state', '.toggles.json.0123456789ab.tmp'), '{"kid_mode":true}');
    expect(new TogglesStore(dir).get()).toEqual({ kid_mode: false, smart_mode: true });
  });
});
