// What the virtual robot keeps across its reboots, like the firmware's NVS and flash: its client id, the two
// OTA partitions and the toggles. One JSON file per device under the robot's state folder (atomic writes).
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-file.js';
import type { FlashState } from './boot.js';

export interface Persisted {
  clientId: string;
  flash: FlashState;
  /** Kept across reboots like the firmware's NVS; both off on a first boot. */
  toggles?: { kid_mode: boolean; smart_mode: boolean };
}

export function freshState(clientId: string, firmwareVersion: string): Persisted {
  return {
    clientId,
    flash: {
      running: 'ota_0',
      partitions: {
        ota_0: { version: firmwareVersion, image: 'valid' },
        ota_1: { version: '', image: 'empty' },
      },
    },
  };
}

function statePath(stateDir: string, deviceId: string): string {
  mkdirSync(stateDir, { recursive: true });
  return join(stateDir, `${deviceId.replaceAll(':', '')}.json`);
}

/** The saved state, or `fresh` when there is none (or it cannot be read). */
export function loadPersisted(stateDir: string | undefined, deviceId: string, fresh: Persisted): Persisted {
  if (!stateDir) return fresh;
  const path = statePath(stateDir, deviceId);
  if (!existsSync(path)) return fresh;
  try {
    return { ...fresh, ...(JSON.parse(readFileSync(path, 'utf8')) as Partial<Persisted>) };
  } catch {
    return fresh;
  }
}

export async function savePersisted(
  stateDir: string | undefined,
  deviceId: string,
  state: Persisted,
): Promise<void> {
  if (stateDir) await writeFileAtomic(statePath(stateDir, deviceId), JSON.stringify(state, null, 2));
}
