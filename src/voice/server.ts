// The voice server: WebSocket listener (devices) + HTTP listener (OTA, admin), sharing one device registry.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { AssetLibrary } from '../audio/assets.js';
import { loadResampler } from '../audio/resample.js';
import type { Config } from '../config/index.js';
import { AgentLlm } from '../providers/llm/agent.js';
import { defaultWakeWords, WakeWordList } from '../robot/wake-words.js';
import { createHttpApp, type LimitName } from '../util/http-app.js';
import type { Logger } from '../util/log.js';
import { registerMetricsRoute } from '../util/metrics.js';
import { VERSION } from '../version.js';
import { ActivationService } from './activation.js';
import { describeAdminAccess, registerAdminAuth, type VoiceAdminAuthOptions } from './admin-auth.js';
import { registerAdminRoutes } from './admin-routes.js';
import { voiceAdminToken } from './admin-token.js';
import { Conversation, type ConversationOptions } from './conversation.js';
import { registerDeviceCors } from './cors.js';
import { FirmwareStore } from './firmware-store.js';
import { turnReport, VoiceMetrics } from './metrics.js';
import { OTA_ROUTES, registerOtaRoutes } from './ota-routes.js';
import { PerceptionRelay, TurnRelay } from './perception-relay.js';
import { createProviders, type VoiceProviders } from './providers.js';
import { AudioRecorder } from './recorder.js';
import { DeviceRegistry } from './registry.js';
import { DeviceSession } from './session.js';
import { readToggles, type Toggles } from './toggles.js';
import { registerVision, VISION_PATH, visionAvailable } from './vision.js';
import { createWsListener } from './ws-listener.js';

export const DOWNLINK_SAMPLE_RATE = 24_000;
export const DOWNLINK_FRAME_MS = 60;

export interface VoiceServer {
  readonly registry: DeviceRegistry<DeviceSession>;
  readonly wsPort: number;
  readonly httpPort: number;
  readonly providers: VoiceProviders;
  /** kid_mode / smart_mode as the voice server applies them (pushed by the bridge through set-toggle). */
  readonly toggles: Toggles;
  readonly relay: PerceptionRelay;
  readonly metrics: VoiceMetrics;
  /** The admin token (VOICE_ADMIN_TOKEN or DATA_DIR/voice-admin-token) and who may call, in words. */
  readonly admin: { token: string; access: string };
  conversationOf(session: DeviceSession): Conversation | undefined;
  /** Called for every new device session, so later stages (the turn pipeline) can attach. */
  onSession(listener: (session: DeviceSession) => void): void;
  close(): Promise<void>;
}

export interface VoiceServerOptions {
  /** Providers to use instead of the ones the configuration selects. */
  providers?: VoiceProviders;
}

export async function startVoiceServer(
  config: Config,
  logger: Logger,
  options: VoiceServerOptions = {},
): Promise<VoiceServer> {
  const dataDir = resolve(config.data_dir);
  await loadResampler();
  const toggles = readToggles(dataDir, (line) => logger.warn(line));
  const providers = options.providers ?? createProviders(config, logger.child({ component: 'llm' }), toggles);
  await providers.createVad(); // fail at startup, not at the first hello
  mkdirSync(dataDir, { recursive: true });
  const registry = new DeviceRegistry<DeviceSession>();
  const sessionListeners: Array<(session: DeviceSession) => void> = [];
  const authSecret = config.auth.enabled ? resolveAuthSecret(config.auth.secret, dataDir) : undefined;
  let wsPort = config.server.ws_port;
  let httpPort = config.server.http_port;

  const metrics = new VoiceMetrics(() => registry.list().length, providers.asr);
  const onLimit = (limit: LimitName) => metrics.limitHit(limit);
  const app = createHttpApp({
    logger: logger.child({ component: 'voice-http' }),
    limits: config.limits,
    onLimit,
  });
  registerDeviceCors(app, [...OTA_ROUTES, VISION_PATH]);
  registerOtaRoutes(app, {
    firmware: new FirmwareStore(join(dataDir, 'firmware')),
    activation: new ActivationService(config.activation.hmac_key, join(dataDir, 'activations.json')),
    forceFirmware: config.firmware.force,
    websocketUrl: config.server.websocket,
    publicHost: config.server.public_host,
    wsPort: () => wsPort,
    httpPort: () => httpPort,
    wsProtocolVersion: config.server.ws_protocol_version,
    timezoneOffsetMin: config.server.timezone_offset_min,
    ...(authSecret ? { auth: { secret: authSecret, ttlSec: config.auth.token_ttl_sec } } : {}),
  });
  const conversations = new WeakMap<DeviceSession, Conversation>();
  const recorders = new WeakMap<DeviceSession, AudioRecorder>();
  const assets = new AssetLibrary(join(dataDir, 'songs'));
  let songNames: string[] = [];
  const refreshSongs = () =>
    assets.list().then((list) => {
      songNames = list.map((a) => a.name);
    });
  await refreshSongs();
  const songTimer = setInterval(() => void refreshSongs(), 10_000);
  songTimer.unref();
  const adminToken = voiceAdminToken(config.voice_admin.token, dataDir);
  const adminAuth: VoiceAdminAuthOptions = {
    token: adminToken.token,
    tokenRequired: adminToken.source === 'env',
    allow: config.voice_admin.allow,
  };
  registerAdminAuth(app, adminAuth);
  registerAdminRoutes(app, {
    registry,
    toggles,
    llm: providers.llm,
    inProcessSmartMode: config.voice_provider === 'twotier',
    conversationOf: (session) => conversations.get(session),
    recorderOf: (session) => recorders.get(session),
    assets,
    mcpTimeoutMs: Math.min(config.mcp.timeout_ms, 10_000),
  });
  const conversationOptions: ConversationOptions = {
    robotName: config.voice.robot_name,
    wakeWords: new WakeWordList(
      config.voice.wake_words.length > 0
        ? config.voice.wake_words
        : defaultWakeWords(config.voice.robot_name),
    ),
    wakeGreeting: config.voice.wake_word_reply === 'greeting' ? config.voice.wake_greeting : '',
    systemPrompt: config.voice.system_prompt.replaceAll('{robot_name}', config.voice.robot_name),
    minUtteranceChars: config.voice.min_utterance_chars,
    historyMessages: config.voice.history_messages,
    stopMarginMs: config.voice.tts_stop_margin_ms,
    ...(config.voice.tts_stop_stall_margin_ms !== undefined
      ? { stallMarginMs: config.voice.tts_stop_stall_margin_ms }
      : {}),
    ...(config.voice.tts_tail_silence_ms !== undefined
      ? { tailSilenceMs: config.voice.tts_tail_silence_ms }
      : {}),
    maxUtteranceMs: config.VAD.silero.max_utterance_ms,
    utterance: {
      silenceMs: config.VAD.silero.min_silence_duration_ms,
      prerollMs: config.VAD.silero.preroll_ms,
      maxUtteranceMs: config.VAD.silero.max_utterance_ms,
      startThreshold: config.VAD.silero.threshold,
      endThreshold: config.VAD.silero.threshold_low,
    },
  };

  await registerVision(app, {
    registry,
    vlm: { url: config.vision.vlm_api_url, apiKey: config.cloud.api_key, model: config.vision.vlm_model },
    available: () => visionAvailable(config),
    timeoutMs: 20_000,
    logger: logger.child({ component: 'vision' }),
  });

  const wsLogger = logger.child({ component: 'voice-ws' });
  const relay = new PerceptionRelay({ bridgeUrl: config.bridge.url, logger: wsLogger });
  const turnRelay = new TurnRelay({ bridgeUrl: config.bridge.url, logger: wsLogger, maxQueue: 100 });
  registerMetricsRoute(app, metrics);
  const storyLlm = new AgentLlm({
    url: `${config.bridge.url.replace(/\/+$/, '')}/api/story/stream`,
    channel: 'story',
    timeoutSec: 60,
  });
  const wsServer = createWsListener({
    logger: wsLogger,
    limits: config.limits,
    onLimit,
    ...(authSecret ? { authSecret } : {}),
    onConnection: (socket, info, request) => {
      const host = config.server.public_host || hostnameOf(request.headers.host);
      const session = new DeviceSession(socket, info, {
        logger: wsLogger,
        serverVersion: VERSION,
        visionUrl: `http://${host}:${httpPort}/mcp/vision/explain`,
        helloTimeoutMs: config.server.hello_timeout_sec * 1000,
        idleTimeoutMs: config.server.idle_timeout_sec * 1000,
        maxFrameBytes: config.server.max_frame_bytes,
        maxTools: config.limits.mcp_max_tools,
        maxToolListBytes: config.limits.mcp_max_tool_list_bytes,
        onLimit,
        mcpTimeoutMs: config.mcp.timeout_ms,
        downlinkSampleRate: DOWNLINK_SAMPLE_RATE,
        downlinkFrameMs: DOWNLINK_FRAME_MS,
      });
      registry.add(session);
      session.on('closed', () => registry.remove(session));
      session.on('event', (event) =>
        relay.send(event.name, event.data ?? {}, session.deviceId, session.sessionId),
      );
      // Security mode keeps the last seconds of the microphone for the bridge's audio captions.
      const recorder = new AudioRecorder();
      recorders.set(session, recorder);
      session.on('audio', (packet) => {
        if (conversations.get(session)?.robotState === 'security') recorder.push(packet);
      });
      // Re-sync the toggle pips on every (re)connection: the device boots with both off. The voice server's
      // toggles are the persisted ones (read at start) plus every change the bridge pushed since.
      session.once('ready', () => {
        if (!session.tools.some((tool) => tool.name === 'self.robot.set_toggle')) return;
        for (const name of ['kid_mode', 'smart_mode'] as const) {
          session.mcp
            .callTool('self.robot.set_toggle', { name, enabled: toggles[name] }, { timeoutMs: 5000 })
            .catch((error: Error) => wsLogger.warn({ err: error.message, name }, 'toggle re-sync failed'));
        }
      });
      // The conversation exists before the first frame is read, so a `listen` right after hello is never lost.
      const conversation = new Conversation({
        session,
        ...providers,
        vad: providers.createVad(),
        options: conversationOptions,
        logger: wsLogger,
        assets,
        songs: () => songNames,
        kidMode: () => toggles.kid_mode,
        storyLlm,
        onWakeWord: (text) => relay.send('wake_word_detected', { text }, session.deviceId, session.sessionId),
      });
      conversation.on('turn', (timing) => {
        const report = turnReport(timing, session.deviceId, session.sessionId);
        metrics.observeTurn(report);
        turnRelay.enqueue(report);
      });
      conversations.set(session, conversation);
      wsLogger.info(
        { device: info.deviceId, version: info.binaryVersion, remote: info.remoteAddress },
        'device connected',
      );
      for (const listener of sessionListeners) {
        try {
          listener(session);
        } catch (error) {
          wsLogger.error({ err: error }, 'session listener failed');
        }
      }
    },
  });

  await app.listen({ host: config.server.bind_host, port: httpPort });
  httpPort = (app.server.address() as AddressInfo).port;
  wsPort = await listen(wsServer, config.server.bind_host, wsPort);

  return {
    registry,
    get wsPort() {
      return wsPort;
    },
    get httpPort() {
      return httpPort;
    },
    providers,
    toggles,
    conversationOf: (session) => conversations.get(session),
    onSession: (listener) => sessionListeners.push(listener),
    relay,
    metrics,
    admin: { token: adminToken.token, access: describeAdminAccess(adminAuth, adminToken.source) },
    async close() {
      clearInterval(songTimer);
      relay.close();
      turnRelay.close();
      for (const session of registry.list()) session.close(1001, 'server shutting down');
      await new Promise<void>((done) => {
        wsServer.close(() => done());
        wsServer.closeAllConnections();
      });
      await app.close();
      // Providers handed in by the caller may serve another server; only our own are released.
      if (!options.providers) providers.asr.close?.();
    },
  };
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolvePort, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolvePort((server.address() as AddressInfo).port);
    });
  });
}

function hostnameOf(hostHeader: string | undefined): string {
  const host = hostHeader ?? 'localhost';
  return host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
}

/** The WS token secret: configured, else generated once and kept under DATA_DIR so tokens survive restarts. */
function resolveAuthSecret(configured: string, dataDir: string): string {
  if (configured) return configured;
  const path = join(dataDir, 'auth-secret');
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  const secret = randomBytes(32).toString('hex');
  writeFileSync(path, secret, { mode: 0o600 });
  return secret;
}
