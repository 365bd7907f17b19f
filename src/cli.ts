// The `deskbot` command: services, the virtual robot, and small tools.
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { agentCommand, startBridge } from './bridge/server.js';
import { type Config, ConfigError, loadConfig } from './config/index.js';
import { VirtualRobot } from './device/robot.js';
import { fetchModel, isModelInstalled, listModels } from './models/fetch.js';
import { isBinaryVersion } from './protocol/index.js';
import { createLogger } from './util/log.js';
import { VERSION } from './version.js';
import { startVoiceServer } from './voice/server.js';

const USAGE = `deskbot ${VERSION} — backend for a xiaozhi-protocol desk robot

Usage:
  deskbot start                 voice server + bridge + agent (embedded defaults)
  deskbot voice                 the voice server only (WS :8000, HTTP :8003)
  deskbot bridge                the bridge (HTTP :8080) and the agent runtime it drives
  deskbot agent                 the embedded ACP agent on stdio
  deskbot robot [options]       the virtual robot: boots via OTA, connects, talks
      --ota URL                 boot endpoint (default http://localhost:8003/device/ota/)
      --device-id MAC           default: a random locally administered MAC
      --protocol-version N      binary framing 1, 2 or 3 (default 1, or what OTA says)
      --state-dir DIR           keep the robot's flash and identity here
      --once                    exit after the handshake and MCP discovery
      --say TEXT                say TEXT into the microphone (espeak-ng), print the reply, exit
      --wav FILE                send a 16-bit WAV file as microphone input, print the reply, exit
      --out FILE                with --say/--wav: save the reply audio the robot heard as WAV
  deskbot models list           speech models for the sherpa providers, and which are installed
  deskbot models fetch NAME [--force]   download one (needs internet) into DATA_DIR/models/NAME
  deskbot --version | --help

Configuration: config/voice.yaml (VOICE_CONFIG) and environment variables; see README.`;

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
        return await runRobot(rest);
      case 'models':
        return await runModels(rest);
      default:
        console.error(`deskbot: unknown command "${command}"\n\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`deskbot: configuration error: ${error.message}`);
      return 78;
    }
    throw error;
  }
}

async function runServices(command: 'start' | 'voice' | 'bridge'): Promise<number> {
  const config = loadConfig();
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
    throw error;
  }
  const host = config.server.bind_host === '0.0.0.0' ? 'localhost' : config.server.bind_host;
  const lines = [`deskbot ${VERSION} (${command})`];
  if (voice) {
    lines.push(
      `  device WebSocket   ws://${host}:${voice.wsPort}/device/v1/`,
      `  boot (OTA)         http://${host}:${voice.httpPort}/device/ota/`,
      `  voice admin        http://${host}:${voice.httpPort}/device/admin/devices`,
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

async function runRobot(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ota: { type: 'string', default: 'http://localhost:8003/device/ota/' },
      'device-id': { type: 'string' },
      'protocol-version': { type: 'string' },
      'state-dir': { type: 'string' },
      once: { type: 'boolean', default: false },
      say: { type: 'string' },
      wav: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const protocolVersion = values['protocol-version'] ? Number(values['protocol-version']) : undefined;
  if (protocolVersion !== undefined && !isBinaryVersion(protocolVersion)) {
    console.error('deskbot robot: --protocol-version must be 1, 2 or 3');
    return 2;
  }
  const robot = new VirtualRobot({
    otaUrl: values.ota,
    ...(values['device-id'] ? { deviceId: values['device-id'] } : {}),
    ...(protocolVersion ? { protocolVersion } : {}),
    ...(values['state-dir'] ? { stateDir: values['state-dir'] } : {}),
    retryBaseMs: 1000,
    maxBootAttempts: 3,
    log: (message, fields) => console.log(`robot: ${message}${fields ? ` ${JSON.stringify(fields)}` : ''}`),
  });
  console.log(`robot ${robot.deviceId}: booting from ${values.ota}`);
  await robot.boot();
  console.log(
    `robot: firmware ${robot.firmwareVersion} on ${robot.partition}; websocket ${robot.ota?.websocket?.url}`,
  );
  await robot.connect();
  console.log(`robot: connected, session ${robot.sessionId}, binary protocol v${robot.protocolVersion}`);
  robot.on('frame', (frame) => {
    if (frame.type !== 'mcp') console.log(`robot <- ${JSON.stringify(frame)}`);
  });
  const discovered = await waitForDiscovery(robot, 10_000);
  console.log(
    discovered
      ? `robot: MCP initialized; vision endpoint ${robot.vision.url}`
      : 'robot: no MCP initialize yet',
  );
  if (values.say !== undefined || values.wav !== undefined) {
    const reply = new Promise<{ pcm: Int16Array; sentences: string[] }>((resolveReply, reject) => {
      robot.once('reply', resolveReply);
      setTimeout(() => reject(new Error('no reply within 60 s')), 60_000).unref();
    });
    if (values.say !== undefined) await robot.say(values.say, { paced: true });
    else await robot.sendWav(await readFile(values.wav!), { paced: true });
    const { pcm, sentences } = await reply;
    console.log(
      `robot heard: ${sentences.join(' ')} (${(pcm.length / robot.downlinkSampleRate).toFixed(1)} s of audio)`,
    );
    if (values.out) {
      await robot.saveReplyWav(values.out, pcm);
      console.log(`robot: reply saved to ${values.out}`);
    }
    robot.disconnect();
    return 0;
  }
  if (values.once) {
    robot.disconnect();
    return discovered ? 0 : 1;
  }
  robot.on('disconnected', (code) => console.log(`robot: disconnected (${code})`));
  await waitForSignal();
  robot.disconnect();
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

/** MCP discovery ends with the server's second tools/list; wait until the vision URL arrived and the lists settled. */
async function waitForDiscovery(robot: VirtualRobot, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let lastListAt = 0;
  robot.on('frame', (frame) => {
    if (frame.type === 'mcp' && frame.payload.method === 'tools/list') lastListAt = Date.now();
  });
  while (Date.now() < deadline) {
    if (robot.vision.url && lastListAt && Date.now() - lastListAt > 300) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return Boolean(robot.vision.url);
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
