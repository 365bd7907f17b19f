// The mirror's ring JSON (ages, not clock times) and the browser copy of the LED module: the build when
// fresh, else src/robot/led.ts transpiled, and never a module that needs another import.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { blankSnapshot, type DeviceSnapshot } from '../../src/bridge/perception/device-state.js';
import { assertSelfContained, LedModule } from '../../src/bridge/ui/assets.js';
import { ringWire } from '../../src/bridge/ui/ring.js';
import { renderRing } from '../../src/robot/led.js';
import { PACKAGE_ROOT } from '../../src/version.js';

const NOW = 1_000_000;
const toggles = { kid_mode: false, smart_mode: true };

function device(overrides: Partial<DeviceSnapshot> = {}): DeviceSnapshot {
  return {
    ...blankSnapshot('d1', NOW - 700),
    session_id: 's',
    state: 'talk',
    state_since: NOW - 1500,
    previous_state: 'idle',
    face: { present: false, last_seen: NOW - 3000, lost_at: NOW - 700 },
    events: 3,
    ...overrides,
  };
}

describe('ringWire', () => {
  it('sends ages before the server clock', () => {
    const wire = ringWire({ device: device(), toggles, nowMs: NOW, refreshing: false });
    expect(wire).toMatchObject({
      device_id: 'd1',
      known: true,
      state: 'talk',
      state_age_ms: 1500,
      face_present: false,
      face_lost_age_ms: 700,
      identified_age_ms: null,
      listening: false,
      dance_age_ms: null,
      toggles,
      updated_age_ms: 700,
      server_now_ms: NOW,
    });
  });

  it('draws a device without a reported state as idle; no device gives the default ring', () => {
    const wire = ringWire({
      device: device({ state: null, state_since: null }),
      toggles,
      nowMs: NOW,
      refreshing: false,
    });
    expect(wire).toMatchObject({ state: 'idle', reported_state: null, state_age_ms: 0 });
    expect(ringWire({ device: undefined, toggles, nowMs: NOW, refreshing: false })).toMatchObject({
      device_id: null,
      known: false,
      state: 'idle',
    });
    expect(
      ringWire({ device: undefined, requestedId: 'x', toggles, nowMs: NOW, refreshing: false }).device_id,
    ).toBe('x');
  });

  it('identified while the refresher runs, else within the firmware 4000 ms of face_recognized', () => {
    const recognized = (ageMs: number) =>
      device({
        identified: { name: 'Ada', confidence: 0.9, at: NOW - ageMs },
        face: { present: true, last_seen: NOW, lost_at: null },
      });
    expect(
      ringWire({ device: recognized(3999), toggles, nowMs: NOW, refreshing: false }).identified_age_ms,
    ).toBe(3999);
    expect(
      ringWire({ device: recognized(4000), toggles, nowMs: NOW, refreshing: false }).identified_age_ms,
    ).toBeNull();
    expect(
      ringWire({ device: recognized(9000), toggles, nowMs: NOW, refreshing: true }).identified_age_ms,
    ).toBe(0);
  });

  it('listening from chat_status, the dance clock only while dancing', () => {
    const wire = ringWire({
      device: device({
        state: 'dance',
        chat_status: { status: 'listening', at: NOW },
        dance: { active: true, song: 'x', since: NOW - 250 },
      }),
      toggles,
      nowMs: NOW,
      refreshing: false,
    });
    expect(wire).toMatchObject({ listening: true, dance_age_ms: 250 });
  });
});

describe('LedModule', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** A package root with src/robot/led.ts (the real one) and, optionally, a build of given age. */
  function root(built?: { js: string; ageSec: number }): string {
    const dir = mkdtempSync(join(tmpdir(), 'deskbot-led-module-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'src', 'robot'), { recursive: true });
    copyFileSync(join(PACKAGE_ROOT, 'src', 'robot', 'led.ts'), join(dir, 'src', 'robot', 'led.ts'));
    if (built) {
      mkdirSync(join(dir, 'dist', 'src', 'robot'), { recursive: true });
      const path = join(dir, 'dist', 'src', 'robot', 'led.js');
      writeFileSync(path, built.js);
      const at = Date.now() / 1000 + built.ageSec;
      utimesSync(path, at, at);
    }
    return dir;
  }

  const load = (js: string) => import(`data:text/javascript;base64,${Buffer.from(js).toString('base64')}`);

  it('transpiles the source when there is no build, once, into a module that renders like the robot', async () => {
    let transpiles = 0;
    const led = new LedModule(root(), async (source) => {
      transpiles++;
      const ts = (await import('typescript')).default;
      return ts.transpileModule(source, {
        compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
      }).outputText;
    });
    const js = await led.js();
    expect(await led.js()).toBe(js);
    expect(transpiles).toBe(1);
    expect(js).not.toMatch(/^\s*import\s/m);
    const input = {
      state: 'dance' as const,
      stateSince: 0,
      toggles,
      facePresent: true,
      listening: true,
      now: 450,
    };
    expect((await load(js)).renderRing(input)).toEqual(renderRing(input));
  });

  it('the default transpiler works too (typescript, ES2022 module)', async () => {
    const js = await new LedModule(root()).js();
    expect(js).toContain('export function renderRing');
    expect(js).not.toContain('import type');
  });

  it('prefers a build at least as new as the source, and ignores a stale one', async () => {
    const fresh = new LedModule(
      root({ js: 'export const renderRing = () => "built";\n//# sourceMappingURL=led.js.map\n', ageSec: 60 }),
    );
    const js = await fresh.js();
    expect(js).toContain('"built"');
    expect(js).not.toContain('sourceMappingURL');
    const stale = new LedModule(root({ js: 'export const renderRing = () => "built";', ageSec: -3600 }));
    expect(await stale.js()).toContain('export function renderRing');
  });

  it('refuses a module with runtime imports (it could not load alone in the browser)', async () => {
    expect(() => assertSelfContained("import { x } from './states.js';\nexport const y = x;")).toThrow(
      /imports/,
    );
    expect(() => assertSelfContained("export * from './states.js';")).toThrow(/imports/);
    expect(() => assertSelfContained('export const a = 1; // import nothing')).not.toThrow();
    const bad = new LedModule(root({ js: "import './x.js';\nexport const renderRing = 1;", ageSec: 60 }));
    await expect(bad.js()).rejects.toThrow(/imports/);
  });
});
