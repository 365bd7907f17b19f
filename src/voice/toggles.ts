// The two toggles as the voice server knows them. The bridge owns and persists them (DATA_DIR/state/
// toggles.json) and pushes changes through set-toggle; the voice server reads the file at start.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Toggles {
  kid_mode: boolean;
  smart_mode: boolean;
}

export function togglesPath(dataDir: string): string {
  return join(dataDir, 'state', 'toggles.json');
}

/** Both off (the firmware's boot state) unless the bridge has persisted something readable. */
export function readToggles(dataDir: string): Toggles {
  const path = togglesPath(dataDir);
  const toggles: Toggles = { kid_mode: false, smart_mode: false };
  if (!existsSync(path)) return toggles;
  try {
    const saved = JSON.parse(readFileSync(path, 'utf8')) as Partial<Record<keyof Toggles, unknown>>;
    if (typeof saved.kid_mode === 'boolean') toggles.kid_mode = saved.kid_mode;
    if (typeof saved.smart_mode === 'boolean') toggles.smart_mode = saved.smart_mode;
  } catch {
    // a damaged file means defaults; the bridge rewrites it atomically on the next change
  }
  return toggles;
}
