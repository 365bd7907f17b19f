// The two toggles as the voice server knows them. The bridge owns and persists them (DATA_DIR/state/
// toggles.json, with toggles.json.bak the last good copy) and pushes changes through set-toggle; the voice
// server reads the file at start.
import { join } from 'node:path';
import { readStateFile, warnOnStderr } from '../util/state-file.js';

export interface Toggles {
  kid_mode: boolean;
  smart_mode: boolean;
}

export function togglesPath(dataDir: string): string {
  return join(dataDir, 'state', 'toggles.json');
}

/** Never persisted: both off, the firmware's boot state. */
const FRESH: Toggles = { kid_mode: false, smart_mode: false };
/**
 * When the file and its copy are both unreadable: a kid robot must not lose its guardrails because a file was
 * damaged, so kid mode comes back on; smart mode (cloud, costs money) comes back off.
 */
export const FAIL_SAFE_TOGGLES: Readonly<Toggles> = { kid_mode: true, smart_mode: false };

/** A saved state is valid only if kid_mode can be read; smart_mode is on only when it says exactly true. */
function parseToggles(raw: unknown): Toggles | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const saved = raw as Partial<Record<keyof Toggles, unknown>>;
  if (typeof saved.kid_mode !== 'boolean') return undefined;
  return { kid_mode: saved.kid_mode, smart_mode: saved.smart_mode === true };
}

/** The persisted toggles, the last good copy when the file is damaged, else FAIL_SAFE_TOGGLES (logged). */
export function readToggles(dataDir: string, warn: (line: string) => void = warnOnStderr): Toggles {
  const read = readStateFile(togglesPath(dataDir), parseToggles, warn);
  if (read.from === 'missing') return { ...FRESH };
  if (read.value) return read.value;
  warn('kid mode is ON and smart mode off until set again (fail safe)');
  return { ...FAIL_SAFE_TOGGLES };
}
