// The voice admin token: VOICE_ADMIN_TOKEN when set, else one generated into DATA_DIR on first start.
// The bridge on the same host reads the same file, so the two always agree without any set-up, and the
// toggles (kid_mode, smart_mode) can be accepted only from a caller that holds it: the bridge.
import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const VOICE_ADMIN_TOKEN_FILE = 'voice-admin-token';

export interface AdminToken {
  token: string;
  /** `env` when VOICE_ADMIN_TOKEN (or voice_admin.token) set it, else the file it lives in. */
  source: 'env' | string;
}

/**
 * The configured token, else the one in DATA_DIR, created on first use. The voice server and the bridge may both
 * get here first: the token is written whole to a private name and linked into place, so exactly one of them
 * publishes it and neither can read a half-written file.
 */
export function voiceAdminToken(configured: string, dataDir: string): AdminToken {
  if (configured.trim()) return { token: configured.trim(), source: 'env' };
  const path = join(dataDir, VOICE_ADMIN_TOKEN_FILE);
  const existing = readToken(path);
  if (existing) return { token: existing, source: path };
  mkdirSync(dataDir, { recursive: true });
  const draft = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(draft, `${randomBytes(24).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(draft, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(draft);
  }
  const created = readToken(path);
  if (!created)
    throw new Error(`the voice admin token file ${path} is empty; delete it to have a new one made`);
  return { token: created, source: path };
}

function readToken(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw error;
  }
}
