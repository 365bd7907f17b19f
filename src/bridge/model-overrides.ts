// Models set through /admin/model, persisted in DATA_DIR/state/models.json (with models.json.bak, the last
// good copy) so a restarted bridge runs what was last set. A damaged file with no good copy means the
// configured defaults, with a log line.
import { join } from 'node:path';
import { readStateFile, warnOnStderr, writeStateFile } from '../util/state-file.js';

export interface ModelOverrides {
  voice?: string;
  agent?: string;
}

function modelOverridesPath(dataDir: string): string {
  return join(dataDir, 'state', 'models.json');
}

function parseOverrides(raw: unknown): ModelOverrides | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const value = raw as Record<string, unknown>;
  return {
    ...(typeof value.voice === 'string' ? { voice: value.voice } : {}),
    ...(typeof value.agent === 'string' ? { agent: value.agent } : {}),
  };
}

export function readModelOverrides(
  dataDir: string,
  warn: (line: string) => void = warnOnStderr,
): ModelOverrides {
  return readStateFile(modelOverridesPath(dataDir), parseOverrides, warn).value ?? {};
}

export async function saveModelOverride(
  dataDir: string,
  daemon: 'voice' | 'agent',
  model: string,
): Promise<void> {
  const next = { ...readModelOverrides(dataDir), [daemon]: model };
  await writeStateFile(modelOverridesPath(dataDir), next);
}
