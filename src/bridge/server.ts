// The bridge (HTTP :8080): agent-path messages, tool escalations, memory, admin routes, the /v1 pass-through
// to the local router, and the agent runtime it drives over ACP.
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { MemoryStore } from '../agent/memory.js';
import { seedWorkspace } from '../agent/workspace.js';
import type { Clock } from '../audio/pacer.js';
import type { Config } from '../config/index.js';
import { cleanStaleTempFiles } from '../util/atomic-file.js';
import { createHttpApp } from '../util/http-app.js';
import { errorBody } from '../util/http-error.js';
import type { Logger } from '../util/log.js';
import { registerMetricsRoute } from '../util/metrics.js';
import { PACKAGE_ROOT } from '../version.js';
import { voiceAdminToken } from '../voice/admin-token.js';
import { visionAvailable } from '../voice/vision.js';
import { AcpClient } from './acp-client.js';
import { AllowList } from './allow-list.js';
import { captionSound } from './audio-caption.js';
import { Calendar, registerCalendarRoutes } from './calendar/index.js';
import { createControls } from './controls.js';
import { visionText } from './escalation.js';
import { BridgeMetrics } from './metrics.js';
import { readModelOverrides, saveModelOverride } from './model-overrides.js';
import { registerPassthrough } from './passthrough.js';
import { type ConsumersOptions, wallClock } from './perception/consumers.js';
import {
  createPerception,
  faceGreeterOptionsFromConfig,
  type Perception,
  registerPerceptionRoutes,
  voiceActionsFromClient,
} from './perception/index.js';
import { type ModeActions, SecurityWatch, StorySilence } from './perception/modes.js';
import { registerAdminRoutes } from './routes-admin.js';
import { registerApiRoutes } from './routes-api.js';
import { registerStoryRoute } from './story.js';
import { TogglesStore } from './toggles-store.js';
import { registerTurnRoute, TurnLog } from './turns.js';
import { registerUiRoutes } from './ui/routes.js';
import { VoiceClient } from './voice-client.js';

export interface BridgeOptions {
  /** The perception consumers' clock (epoch ms; tests choose the local hour). Default: the wall clock. */
  clock?: Clock;
  /** Consumer timing overrides (tests shorten graces). */
  consumers?: ConsumersOptions;
  /** Security mode: between photos (default 60 s). */
  securityIntervalMs?: number;
  /** Story time ends after this much silence (default 90 s). */
  storySilenceMs?: number;
  /** argv of the agent runtime; default AGENT_CMD, else this package's `deskbot agent`. */
  agentCommand?: string[];
  /** Extra environment for the agent child (tests point its model at a scripted server). */
  agentEnv?: Record<string, string>;
}

export interface Bridge {
  readonly port: number;
  readonly toggles: TogglesStore;
  readonly perception: Perception;
  readonly metrics: BridgeMetrics;
  readonly calendar: Calendar;
  readonly turns: TurnLog;
  agent(): AcpClient;
  memory(): Promise<MemoryStore>;
  close(): Promise<void>;
}

export async function startBridge(
  config: Config,
  logger: Logger,
  options: BridgeOptions = {},
): Promise<Bridge> {
  const dataDir = resolve(config.data_dir);
  const workspaceDir = join(dataDir, 'workspace');
  await seedWorkspace(workspaceDir);
  let memoryStore: Promise<MemoryStore> | undefined;
  const memory = () => (memoryStore ??= MemoryStore.open(workspaceDir));
  const toggles = new TogglesStore(dataDir, (line) => logger.warn(line));
  // The voice server's admin token: VOICE_ADMIN_TOKEN, or the one the voice server on this host keeps in DATA_DIR.
  const voice = new VoiceClient(
    config.bridge.voice_url,
    voiceAdminToken(config.voice_admin.token, dataDir).token,
  );
  await cleanStaleTempFiles([workspaceDir, join(workspaceDir, 'memory'), join(dataDir, 'state')]);
  const agentModel = () => readModelOverrides(dataDir).agent ?? config.agent.model;
  const cloudKey = () => Boolean(config.LLM.TwoTier.cloud_api_key || config.cloud.api_key);
  const inProcessSmartMode = config.voice_provider === 'twotier';
  const agentLog = logger.child({ component: 'acp' });

  const makeAgent = (model: string) =>
    new AcpClient({
      command: options.agentCommand ?? agentCommand(config.agent.command),
      cwd: workspaceDir,
      env: { ...process.env, DATA_DIR: dataDir, AGENT_MODEL: model, ...options.agentEnv },
      logger: agentLog,
      turnTimeoutMs: config.agent.turn_timeout * 1000,
      rotation: {
        idleMs: config.agent.session_idle_sec * 1000,
        maxTurns: config.agent.session_max_turns,
        maxAgeMs: config.agent.session_max_age_sec * 1000,
      },
    });
  const startAgent = (client: AcpClient) =>
    client
      .start()
      .catch((error) =>
        agentLog.error(
          { err: (error as Error).message },
          'agent runtime failed to start; retrying in the background',
        ),
      );
  let agent = makeAgent(
    !inProcessSmartMode && toggles.get().smart_mode ? config.LLM.TwoTier.smart_model : agentModel(),
  );
  void startAgent(agent);

  // Bodies up to 1 MiB: a 256 KiB persona file, JSON-escaped, must fit.
  const app = createHttpApp({
    logger: logger.child({ component: 'bridge' }),
    bodyLimit: 1024 * 1024,
    limits: config.limits,
  });
  // Filled in once perception exists; the metrics only read it at scrape time.
  let perceptionDropped = () => 0;
  const metrics = new BridgeMetrics({
    acpSessions: () => agent.activeSessions,
    perceptionDropped: () => perceptionDropped(),
  });
  metrics.instrument(app);
  registerMetricsRoute(app, metrics);
  const calendar = new Calendar({
    feeds: config.calendar.feeds,
    household: config.calendar.household,
    refreshSec: config.calendar.refresh_sec,
    fetchTimeoutMs: config.calendar.fetch_timeout_ms,
    maxFeedBytes: config.calendar.max_feed_bytes,
    timeZone: config.calendar.time_zone,
    logger: logger.child({ component: 'calendar' }),
    onFetchFailure: (person) => metrics.calendarFetchFailed(person),
  });
  registerCalendarRoutes(app, calendar);
  const restartAgent = async (model?: string) => {
    const previous = agent;
    agent = makeAgent(model ?? agentModel());
    await previous.close();
    void startAgent(agent);
  };
  const controls = createControls({
    toggles,
    voice,
    inProcessSmartMode,
    cloudKeyPresent: cloudKey,
    restartAgent,
    smartModel: config.LLM.TwoTier.smart_model,
    agentModel,
    onToggleChanged: (name, enabled) => metrics.toggleChanged(name, enabled),
  });
  registerApiRoutes(app, {
    agent: () => agent,
    memory,
    channels: { robot: config.bridge.robot_channel, legacy: config.bridge.robot_channel_legacy },
    kidMode: () => toggles.get().kid_mode,
    maxSentences: config.bridge.max_sentences,
    calendarText: () => calendar.promptText(),
    escalation: {
      memory,
      voice,
      kidMode: () => toggles.get().kid_mode,
      localRouter: { url: config.local_router.url, thinkModel: config.local_router.think_model },
      visionAvailable: () => visionAvailable(config),
      // A little under the voice client's own deadline, so it receives our "took too long" result.
      shortTimeoutMs: Math.max(100, config.bridge.timeout_short * 1000 - 250),
      thinkTimeoutMs: config.bridge.thinker_timeout * 1000,
      logger: logger.child({ component: 'escalation' }),
    },
  });
  registerAdminRoutes(app, {
    adminHosts: config.bridge.admin_hosts,
    controls,
    toggles,
    voice,
    workspaceDir,
    memory,
    allowList: new AllowList(dataDir, logger),
    voiceEndpoint: (smart) => {
      const t = config.LLM.TwoTier;
      return smart
        ? { url: t.cloud_url, apiKey: t.cloud_api_key || config.cloud.api_key }
        : { url: t.url, apiKey: t.api_key };
    },
    restartAgent,
    saveModelOverride: (daemon, model) => saveModelOverride(dataDir, daemon, model),
  });
  const perception = createPerception({
    limits: config.limits,
    onIngest: (event) => metrics.perceptionEvent(event.name),
    voice: voiceActionsFromClient(voice),
    logger: logger.child({ component: 'perception' }),
    kidMode: () => toggles.get().kid_mode,
    ...(options.clock ? { clock: options.clock } : {}),
    consumers: {
      greeter: faceGreeterOptionsFromConfig(config.face_greet),
      aborter: {
        graceMs: config.perception.abort_grace_ms,
        greetingWindowMs: config.perception.abort_greeting_window_ms,
      },
      soundTurner: {
        minEnergy: config.perception.sound_min_energy,
        minIntervalMs: config.perception.sound_min_interval_ms,
      },
      refresher: { intervalMs: config.perception.identified_refresh_ms },
      purr: { cooldownMs: config.perception.purr_cooldown_sec * 1000 },
      ...options.consumers,
    },
  });
  registerPerceptionRoutes(app, perception);
  perceptionDropped = () => perception.bus.stats().dropped;
  const turns = new TurnLog({
    onFirstAudio: (seconds) => metrics.observeFirstAudio(seconds),
    onReport: (report) => {
      if (perception.sse.clientCount > 0) perception.sse.send('turn', report);
    },
  });
  registerTurnRoute(app, turns);
  registerUiRoutes(app, {
    password: config.ui.password,
    sessionTtlSec: config.ui.session_ttl_sec,
    perception,
    controls,
    turns,
    connectedDevices: async () =>
      (await voice.get<{ devices?: Array<Record<string, unknown>> }>('devices', 3000)).devices ?? [],
    calendar,
    logger: logger.child({ component: 'ui' }),
    now: () => (options.clock ?? wallClock).now(),
  });
  const modeActions: ModeActions = {
    describePhoto: async (deviceId, question) => {
      if (toggles.get().kid_mode) return 'photo not taken: the camera is off in kid mode';
      if (!visionAvailable(config)) return 'photo not taken: vision is unavailable (no vision API key)';
      const reply = await voice.post<{ result?: string }>(
        'take-photo',
        { question, device_id: deviceId },
        20_000,
      );
      return visionText(reply.result ?? '');
    },
    captionSound: (deviceId) =>
      captionSound(deviceId, {
        voice,
        model: {
          url: config.cloud.url,
          apiKey: config.cloud.api_key,
          model: config.vision.audio_caption_model,
        },
      }),
    setState: async (deviceId, state) => {
      await voice.post('set-state', { state, device_id: deviceId });
    },
  };
  const clock = options.clock ?? wallClock;
  const stopSecurity = new SecurityWatch(clock, modeActions, {
    journalDir: join(dataDir, 'journal'),
    intervalMs: options.securityIntervalMs ?? config.perception.security_photo_interval_sec * 1000,
  }).subscribe(perception.bus);
  const stopStory = new StorySilence(
    clock,
    modeActions,
    options.storySilenceMs ?? config.perception.story_silence_sec * 1000,
  ).subscribe(perception.bus);
  registerStoryRoute(app, {
    cloud: {
      url: config.cloud.url,
      apiKey: config.cloud.api_key || config.LLM.TwoTier.cloud_api_key,
      model: config.LLM.TwoTier.smart_model,
    },
    kidMode: () => toggles.get().kid_mode,
    maxSentences: config.bridge.max_sentences,
  });
  registerPassthrough(app, config.local_router.url);
  app.get('/health', async (_request, reply) => {
    if (await agent.health(2000)) return { ok: true };
    return reply.status(503).send(errorBody('agent_unreachable', 'the agent runtime is not answering'));
  });

  await app.listen({ host: config.server.bind_host, port: config.bridge.port });
  const port = (app.server.address() as AddressInfo).port;
  return {
    port,
    toggles,
    perception,
    metrics,
    calendar,
    turns,
    agent: () => agent,
    memory,
    async close() {
      stopSecurity();
      stopStory();
      calendar.close();
      await app.close();
      await agent.close();
    },
  };
}

/** AGENT_CMD split like a shell would (quotes respected); default: this package's own `deskbot agent`. */
export function agentCommand(configured: string): string[] {
  if (!configured.trim()) return [process.execPath, join(PACKAGE_ROOT, 'bin', 'deskbot.js'), 'agent'];
  const parts = configured.match(/"[^"]*"|'[^']*'|\S+/g) ?? [];
  return parts.map((part) => part.replace(/^(["'])(.*)\1$/, '$2'));
}
