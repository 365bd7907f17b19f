// The voice server: WebSocket listener (devices) + HTTP listener (OTA, admin), sharing one device registry.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import type { Config } from '../config/index.js';
import { createHttpApp } from '../util/http-app.js';
import type { Logger } from '../util/log.js';
import { VERSION } from '../version.js';
import { ActivationService } from './activation.js';
import { FirmwareStore } from './firmware-store.js';
import { registerOtaRoutes } from './ota-routes.js';
import { DeviceRegistry } from './registry.js';
import { DeviceSession } from './session.js';
import { createWsListener } from './ws-listener.js';

export const DOWNLINK_SAMPLE_RATE = 24_000;
export const DOWNLINK_FRAME_MS = 60;

export interface VoiceServer {
  readonly registry: DeviceRegistry<DeviceSession>;
  readonly wsPort: number;
  readonly httpPort: number;
  /** Called for every new device session, so later stages (the turn pipeline) can attach. */
  onSession(listener: (session: DeviceSession) => void): void;
  close(): Promise<void>;
}

export async function startVoiceServer(config: Config, logger: Logger): Promise<VoiceServer> {
  const dataDir = resolve(config.data_dir);
  mkdirSync(dataDir, { recursive: true });
  const registry = new DeviceRegistry<DeviceSession>();
  const sessionListeners: Array<(session: DeviceSession) => void> = [];
  const authSecret = config.auth.enabled ? resolveAuthSecret(config.auth.secret, dataDir) : undefined;
  let wsPort = config.server.ws_port;
  let httpPort = config.server.http_port;

  const app = createHttpApp({ logger: logger.child({ component: 'voice-http' }) });
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
  app.get('/device/admin/devices', async () => ({
    devices: registry.list().map((session) => ({
      device_id: session.deviceId,
      session_id: session.sessionId,
      client_id: session.info.clientId,
      protocol_version: session.info.binaryVersion,
      connected_at: new Date(session.connectedAt).toISOString(),
      tools: session.tools.map((tool) => tool.name),
    })),
  }));

  const wsLogger = logger.child({ component: 'voice-ws' });
  const wsServer = createWsListener({
    logger: wsLogger,
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
        mcpTimeoutMs: config.mcp.timeout_ms,
        downlinkSampleRate: DOWNLINK_SAMPLE_RATE,
        downlinkFrameMs: DOWNLINK_FRAME_MS,
      });
      registry.add(session);
      session.on('closed', () => registry.remove(session));
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
    onSession: (listener) => sessionListeners.push(listener),
    async close() {
      for (const session of registry.list()) session.close(1001, 'server shutting down');
      await new Promise<void>((done) => {
        wsServer.close(() => done());
        wsServer.closeAllConnections();
      });
      await app.close();
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
