// The `deskbot` command: services, the virtual robot, and small tools.
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { agentCommand, startBridge } from './bridge/server.js';
import { type Config, ConfigError, loadConfig } from './config/index.js';
import { ROBOT_OPTIONS, runRobot } from './device/robot-cli.js';
import { fetchModel, isModelInstalled, listModels } from './models/fetch.js';
import { checkDataDir, storageProblem } from './util/data-dir.js';
import { createLogger } from './util/log.js';
import { VERSION } from './version.js';
import { startVoiceServer } from './voice/server.js';

const USAGE = `deskbot ${VERSION} — backend for a xiaozhi-protocol desk robot

Usage:
  deskbot start                 voice server + bridge + agent (embedded defaults)
  deskbot voice                 the voice server only (WS :8000, HTTP :8003)
  deskbot bridge                the bridge (HTTP :8080) and the agent runtime it drives
  deskbot agent                 the embedded ACP agent on stdio
  deskbot robot [options]       the virtual robot: boots via OTA, connects, talks (robot --help)
${ROBOT_OPTIONS}
  deskbot models list           speech models for the sherpa providers, and which are installed
  deskbot models fetch NAME [--force]   download one (needs internet) into DATA_DIR/models/NAME
  deskbot --version | --help

Configuration: config/voice.yaml (VOICE_CONFIG) and environment variables; see README.`;

/** sysexits EX_CONFIG: the set-up is wrong (configuration, an unusable DATA_DIR), not the program. */
const EXIT_CONFIG = 78;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case '--version':
      case '-v':
      case 'version':
        console.log(VERSION);
        return 0;
      case undefined:
      case '--help':
      case '-h':
      case 'help':
        console.log(USAGE);
        return 0;
      case 'start':
      case 'voice':
      case 'bridge':
        return await runServices(command);
      case 'agent': {
        // stdout carries the ACP protocol: nothing else may print there.
        const { main: runAgent } = await import('./agent/agent.js');
        return await runAgent();
      }
      case 'robot':
        return await runRobot(rest, waitForSignal);
      case 'models':
        return await runModels(rest);
      default:
        console.error(`deskbot: unknown command "${command}"\n\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`deskbot: configuration error: ${error.message}`);
      return EXIT_CONFIG;
    }
    throw error;
  }
}

async function runServices(command: 'start' | 'voice' | 'bridge'): Promise<number> {
  const config = loadConfig();
  // A read-only or full DATA_DIR would otherwise surface as an EROFS/ENOSPC stack trace from whichever store
  // writes first: say it in one line and exit like a configuration error (EX_CONFIG), before any port opens.
  const storage = await checkDataDir(config.data_dir);
  if (storage) {
    console.error(`deskbot: ${storage}`);
    return EXIT_CONFIG;
  }
  const logger = createLogger('deskbot', config.log_level);
  const withVoice = command !== 'bridge';
  const withBridge = command !== 'voice';
  let voice: Awaited<ReturnType<typeof startVoiceServer>> | undefined;
  let bridge: Awaited<ReturnType<typeof startBridge>> | undefined;
  try {
    if (withVoice) voice = await startVoiceServer(config, logger);
    if (withBridge) bridge = await startBridge(config, logger);
  } catch (error) {
    await voice?.close();
    const e = error as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') {
      console.error(
        `deskbot: port already in use (${e.message}); set VOICE_WS_PORT / VOICE_HTTP_PORT / BRIDGE_PORT to free ports`,
      );
      return 1;
    }
    // The probe passed but the disk filled (or was remounted read-only) while the services started.
    const storageFailure = storageProblem(error);
    if (storageFailure) {
      console.error(
        `deskbot: ${storageFailure.condition}; free space or point DATA_DIR at a writable folder`,
      );
      return EXIT_CONFIG;
    }
    throw error;
  }
  const host = config.server.bind_host === '0.0.0.0' ? 'localhost' : config.server.bind_host;
  const lines = [`deskbot ${VERSION} (${command})`];
  if (voice) {
    lines.push(
      `  device WebSocket   ws://${host}:${voice.wsPort}/device/v1/`,
      `  boot (OTA)         http://${host}:${voice.httpPort}/device/ota/`,
      `  voice admin        http://${host}:${voice.httpPort}/device/admin/devices  (${voice.admin.access})`,
      `  speech             VAD ${config.selected_module.VAD} · ASR ${voice.providers.asr.describe()}`,
      `                     TTS ${voice.providers.tts.describe()}`,
      `  language model     ${voice.providers.llm.describe()}`,
    );
  }
  if (bridge) {
    lines.push(
      `  bridge             http://${host}:${bridge.port}/  (admin /admin/* from localhost only)`,
      `  dashboard          http://${host}:${bridge.port}/ui  (${config.ui.password ? 'controls after login' : 'read-only: set UI_PASSWORD for controls'})`,
      `  LED ring mirror    http://${host}:${bridge.port}/ui/led-ring-mirror`,
      `  metrics            http://${host}:${bridge.port}/metrics${voice ? `  and http://${host}:${voice.httpPort}/metrics` : ''}`,
      `  calendar           ${calendarSummary(config)}`,
      `  agent runtime      ${agentCommand(config.agent.command).join(' ')} (model ${config.agent.model})`,
    );
  }
  lines.push(`  data directory     ${resolve(config.data_dir)}`);
  if (voice)
    lines.push(`  try it             npx deskbot robot --ota http://${host}:${voice.httpPort}/device/ota/`);
  console.log(lines.join('\n'));
  if (voice && config.selected_module.LLM === 'CompatLLM')
    await warnIfUnreachable('language model (LLM.CompatLLM.url)', config.LLM.CompatLLM.url);
  if (voice && config.selected_module.LLM === 'TwoTier')
    await warnIfUnreachable('inner-loop model (TWOTIER_LOCAL_URL)', config.LLM.TwoTier.url);
  await waitForSignal();
  console.log('deskbot: shutting down');
  await voice?.close();
  await bridge?.close();
  return 0;
}

async function runModels(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { force: { type: 'boolean', default: false } },
  });
  const dataDir = loadConfig().data_dir;
  const [action, name] = positionals;
  if (action === 'list' || action === undefined) {
    for (const model of listModels()) {
      const installed = isModelInstalled(model.name, dataDir) ? 'installed' : 'not installed';
      console.log(
        `${model.name.padEnd(18)} ${model.kind.padEnd(4)} ${installed.padEnd(14)} ${model.description}`,
      );
    }
    return 0;
  }
  if (action === 'fetch' && name) {
    try {
      const path = await fetchModel(name, join(dataDir, 'models'), {
        log: (line) => console.log(line),
        force: values.force,
      });
      console.log(`installed ${name} in ${path}; select it with selected_module.ASR/TTS: sherpa (or auto)`);
      return 0;
    } catch (error) {
      console.error(`deskbot models fetch: ${(error as Error).message}`);
      return 1;
    }
  }
  console.error('usage: deskbot models list | deskbot models fetch NAME [--force]');
  return 2;
}

/** Startup check: a model endpoint that does not answer gets a clear warning (turns will fail softly). */
async function warnIfUnreachable(what: string, baseUrl: string): Promise<void> {
  try {
    const response = await fetch(`${baseUrl.replace(/\/+$/, '')}/models`, {
      signal: AbortSignal.timeout(2000),
    });
    if (response.status >= 500) throw new Error(`HTTP ${response.status}`);
  } catch (error) {
    console.warn(
      `  warning: ${what} ${baseUrl} does not answer (${(error as Error).message}); spoken turns will say so`,
    );
  }
}

function waitForSignal(): Promise<void> {
  return new Promise((resolveSignal) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolveSignal();
    };
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
}

function calendarSummary(config: Config): string {
  const people = config.calendar.feeds.map((feed) => feed.person);
  if (config.calendar.household) people.push('household');
  return people.length > 0 ? `feeds for ${people.join(', ')}` : 'no feeds (set CALENDAR_FEEDS)';
}
