// The virtual robot's identity across runs. A real robot's MAC never changes, so the server (and every dashboard)
// sees one device however often it reboots; the emulator gets the same by generating a locally administered MAC
// once and keeping it in its state folder.
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { createFileAtomic } from '../util/atomic-file.js';

/** The file in the state folder that holds the device id (one MAC, one line). */
export const DEVICE_ID_FILE = 'device-id';
const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/** A setup problem the user can fix (a bad flag or a broken state folder): one line, no stack trace. */
export class RobotSetupError extends Error {}

export function randomMac(): string {
  const bytes = Array.from({ length: 6 }, () => Math.floor(Math.random() * 256));
  bytes[0] = (bytes[0]! & 0xfe) | 0x02; // locally administered, unicast
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

/**
 * Where `deskbot robot` keeps its flash and identity without `--state-dir`: `$DATA_DIR/robot` when DATA_DIR is
 * set (the installation chose where its state lives), else `~/.deskbot/robot`, so runs from any folder are the
 * same robot.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env, home = homedir()): string {
  return env.DATA_DIR ? resolve(env.DATA_DIR, 'robot') : join(home, '.deskbot', 'robot');
}

/** The device id kept in `stateDir`, created on first use. Concurrent first runs agree on one id. */
export async function stableDeviceId(stateDir: string): Promise<string> {
  const path = join(stateDir, DEVICE_ID_FILE);
  // createFileAtomic never replaces: a second run (or a racing one) keeps the id that is already there.
  await createFileAtomic(path, `${randomMac()}\n`);
  const id = (await readFile(path, 'utf8')).trim().toLowerCase();
  if (!MAC.test(id))
    throw new RobotSetupError(`${path} does not hold a MAC address like 02:ab:cd:ef:01:23; fix or delete it`);
  return id;
}
