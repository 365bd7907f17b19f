// Starting real bridges in tests: the embedded ACP agent's command line, and bridges on temp data dirs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Bridge, type BridgeOptions, startBridge } from '../../src/bridge/server.js';
import { parseConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/util/log.js';
import { freePort } from './net.js';

/** The tsx loader's URL, for `node --import` in a child that runs TypeScript. */
export const TSX_LOADER = import.meta.resolve('tsx');

/**
 * The embedded agent (src/agent/main.ts through tsx) as a child's argv. Absolute paths, because the agent
 * runs with its workspace as cwd.
 */
export const EMBEDDED_AGENT: readonly string[] = [
  process.execPath,
  '--import',
  TSX_LOADER,
  fileURLToPath(new URL('../../src/agent/main.ts', import.meta.url)),
];

/** An "agent" that exits at once: the agent runtime is down (and stays down through every respawn). */
export const DEAD_AGENT: readonly string[] = [process.execPath, '-e', 'process.exit(1)'];

export interface TestBridgeOptions extends Omit<BridgeOptions, 'agentCommand' | 'agentEnv'> {
  /** The bridge's data_dir. */
  dataDir: string;
  /** argv of the agent runtime; default the embedded agent. */
  agentCommand?: readonly string[];
  /** Extra environment for the agent child, on top of LOG_LEVEL=silent. */
  agentEnv?: Record<string, string>;
  /** server.bind_host; default 127.0.0.1 (`url` stays on 127.0.0.1, reachable under 0.0.0.0 too). */
  bindHost?: string;
}

export interface RunningBridge {
  bridge: Bridge;
  url: string;
  dataDir: string;
  workspace: string;
  /** A file under the data dir's state/. */
  state: (file: string) => string;
}

/**
 * Starts a real bridge on 127.0.0.1 (or `bindHost`) from a raw config. `raw.bridge` is merged over `{ port: 0, voice_url }`
 * where the default voice_url is a port nothing listens on (the voice server unreachable).
 */
export async function startTestBridge(
  raw: Record<string, unknown>,
  {
    dataDir,
    agentCommand = EMBEDDED_AGENT,
    agentEnv = {},
    bindHost = '127.0.0.1',
    ...options
  }: TestBridgeOptions,
): Promise<RunningBridge> {
  const { bridge: bridgeRaw = {}, ...rest } = raw as { bridge?: Record<string, unknown> };
  const voiceUrl = bridgeRaw.voice_url ?? `http://127.0.0.1:${await freePort()}`;
  const bridge = await startBridge(
    parseConfig({
      ...rest,
      data_dir: dataDir,
      server: { bind_host: bindHost },
      bridge: { port: 0, ...bridgeRaw, voice_url: voiceUrl },
    }),
    silentLogger,
    { ...options, agentCommand: [...agentCommand], agentEnv: { LOG_LEVEL: 'silent', ...agentEnv } },
  );
  return {
    bridge,
    url: `http://127.0.0.1:${bridge.port}`,
    dataDir,
    workspace: join(dataDir, 'workspace'),
    state: (file) => join(dataDir, 'state', file),
  };
}

/** Bridges and temp dirs a test file starts, so its afterAll can close and remove them all. */
export class TestBridges {
  private readonly dirs: string[] = [];
  private readonly running = new Set<Bridge>();

  constructor(private readonly prefix: string) {}

  /** A fresh temp dir, removed by closeAll. */
  tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), this.prefix));
    this.dirs.push(dir);
    return dir;
  }

  /** startTestBridge with `agentCommand` and `agentEnv`, on `dataDir` (default: a fresh temp dir). */
  async start(
    raw: Record<string, unknown>,
    agentCommand: readonly string[],
    agentEnv: Record<string, string> = {},
    dataDir = this.tempDir(),
  ): Promise<RunningBridge> {
    const running = await startTestBridge(raw, { dataDir, agentCommand, agentEnv });
    this.running.add(running.bridge);
    return running;
  }

  async stop(running: RunningBridge): Promise<void> {
    this.running.delete(running.bridge);
    await running.bridge.close();
  }

  /** Closes every bridge still running, then removes the temp dirs. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.running].map((bridge) => bridge.close()));
    this.running.clear();
    for (const dir of this.dirs) rmSync(dir, { recursive: true, force: true });
  }
}
