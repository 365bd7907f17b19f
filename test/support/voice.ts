// Starts a real voice server on ephemeral ports with its own temporary DATA_DIR.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Config, parseConfig } from '../../src/config/index.js';
import { VirtualRobot, type VirtualRobotOptions } from '../../src/device/robot.js';
import { type Logger, silentLogger } from '../../src/util/log.js';
import type { VoiceProviders } from '../../src/voice/providers.js';
import { startVoiceServer, type VoiceServer } from '../../src/voice/server.js';
import { Timeline } from './timeline.js';

export interface TestVoice {
  voice: VoiceServer;
  dataDir: string;
  otaUrl: string;
  httpUrl: string;
  robot(options?: Partial<VirtualRobotOptions>): VirtualRobot;
  close(): Promise<void>;
}

export interface TestVoiceOptions {
  /** Default: silent. */
  logger?: Logger;
  /** Providers to run instead of the configured ones (built from the parsed config). */
  providers?: (config: Config, dataDir: string, logger: Logger) => VoiceProviders;
}

export async function startTestVoice(
  overrides: Record<string, unknown> = {},
  options: TestVoiceOptions = {},
): Promise<TestVoice> {
  const logger = options.logger ?? silentLogger;
  const dataDir = mkdtempSync(join(tmpdir(), 'deskbot-test-'));
  const raw = {
    data_dir: dataDir,
    // Nothing listens on the discard port: the bridge is "down" unless a test points at its own.
    bridge: { url: 'http://127.0.0.1:9' },
    ...overrides,
    server: { bind_host: '127.0.0.1', ws_port: 0, http_port: 0, ...((overrides.server as object) ?? {}) },
  };
  const config = parseConfig(raw);
  const voice = await startVoiceServer(
    config,
    logger,
    options.providers ? { providers: options.providers(config, dataDir, logger) } : {},
  );
  const httpUrl = `http://127.0.0.1:${voice.httpPort}`;
  const robots: VirtualRobot[] = [];
  return {
    voice,
    dataDir,
    httpUrl,
    otaUrl: `${httpUrl}/device/ota/`,
    robot(options = {}) {
      const robot = new VirtualRobot({ otaUrl: `${httpUrl}/device/ota/`, retryBaseMs: 20, ...options });
      robots.push(robot);
      return robot;
    },
    async close() {
      for (const robot of robots) {
        robot.dropConnection();
        robot.firmware.stop(); // its 200 ms repaint would outlive the test file otherwise
      }
      await voice.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Polls until `check` returns (or resolves to) a truthy value, or fails after timeoutMs. */
export async function eventually<T>(
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export interface ConnectOptions {
  /** Options for the virtual robot. */
  robot?: Partial<VirtualRobotOptions>;
  /** Also wait until the voice server holds the device's MCP tools (a bridge or device tools in play). */
  userTools?: boolean;
}

/**
 * Starts a virtual robot on `t` and waits until the voice server holds its conversation (and, with
 * `userTools`, its tools); the timeline is cleared of the handshake.
 */
export async function connectRobot(
  t: TestVoice,
  { robot: robotOptions = {}, userTools = false }: ConnectOptions = {},
): Promise<{ robot: VirtualRobot; timeline: Timeline }> {
  const robot = t.robot(robotOptions);
  const timeline = new Timeline(robot);
  await robot.start();
  await eventually(() => {
    const session = t.voice.registry.get(robot.deviceId);
    return session && (!userTools || session.userTools.length > 0) && t.voice.conversationOf(session);
  });
  timeline.clear();
  return { robot, timeline };
}
