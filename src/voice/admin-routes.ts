// Voice server admin routes (/device/admin/*): speech, assets, abort and the robot's MCP tools.
// Every route takes an optional device_id (else the only/first connected device): unknown device → 404,
// none connected → 503, bad body → 400, device error → 502, device timeout → 504.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AssetError, type AssetLibrary, isSafeAssetName } from '../audio/assets.js';
import { encodeWav } from '../audio/wav.js';
import { canonicalDeviceId, McpError, toolResultText } from '../protocol/index.js';
import { ProviderConfigError, TwoTierLlm } from '../providers/llm/twotier.js';
import type { LlmProvider } from '../providers/llm/types.js';
import { ROBOT_STATES, TOGGLE_NAMES } from '../robot/states.js';
import { HttpError, parseBody } from '../util/http-error.js';
import type { Conversation } from './conversation.js';
import type { AudioRecorder } from './recorder.js';
import type { DeviceRegistry } from './registry.js';
import type { DeviceSession } from './session.js';
import type { Toggles } from './toggles.js';

export interface AdminRouteOptions {
  registry: DeviceRegistry<DeviceSession>;
  toggles: Toggles;
  llm: LlmProvider;
  /** VOICE_PROVIDER=twotier: smart_mode flips the live TwoTier provider in-process. */
  inProcessSmartMode: boolean;
  conversationOf: (session: DeviceSession) => Conversation | undefined;
  recorderOf?: (session: DeviceSession) => AudioRecorder | undefined;
  assets: AssetLibrary;
  mcpTimeoutMs: number;
}

const deviceId = z.string().min(1).max(64).transform(canonicalDeviceId).optional();
const text = z.string().trim().min(1).max(2000);
const schemas = {
  text: z.object({ text, device_id: deviceId }),
  device: z.object({ device_id: deviceId }),
  asset: z.object({ name: z.string().min(1).max(120), device_id: deviceId }),
  photo: z.object({ question: z.string().max(500).optional(), device_id: deviceId }),
  head: z
    .object({
      yaw: z.number().int().min(-90).max(90).optional(),
      pitch: z.number().int().min(-45).max(45).optional(),
      device_id: deviceId,
    })
    .refine((b) => b.yaw !== undefined || b.pitch !== undefined, 'give yaw and/or pitch'),
  state: z.object({ state: z.enum(ROBOT_STATES), device_id: deviceId }),
  toggle: z.object({ name: z.enum(TOGGLE_NAMES), enabled: z.boolean(), device_id: deviceId }),
  capture: z.object({ seconds: z.number().min(0.5).max(15).default(5), device_id: deviceId }),
  model: z.object({ model: z.string().trim().min(1), url: z.string().url(), api_key: z.string() }),
};

function activeModel(llm: LlmProvider): { model: string; url: string; smart_mode: boolean } | null {
  if (!(llm instanceof TwoTierLlm)) return null;
  return { model: llm.active.model, url: llm.active.url, smart_mode: llm.smartMode };
}

export function registerAdminRoutes(app: FastifyInstance, options: AdminRouteOptions): void {
  const { registry } = options;

  const pick = (id: string | undefined): DeviceSession => {
    const session = registry.pick(id);
    if (session) return session;
    if (id) throw new HttpError(404, 'unknown_device', `device ${id} is not connected`);
    throw new HttpError(503, 'no_device', 'no device is connected');
  };
  const conversation = (id: string | undefined) => {
    const session = pick(id);
    const found = options.conversationOf(session);
    if (!found)
      throw new HttpError(503, 'device_not_ready', `device ${session.deviceId} has not said hello yet`);
    return { session, conversation: found };
  };
  const callTool = async (id: string | undefined, tool: string, args: Record<string, unknown>) => {
    const session = pick(id);
    try {
      const result = await session.mcp.callTool(tool, args, { timeoutMs: options.mcpTimeoutMs });
      return { ok: true, device_id: session.deviceId, tool, result: toolResultText(result) };
    } catch (error) {
      if (error instanceof McpError && error.code === 'timeout') {
        throw new HttpError(504, 'device_timeout', `device did not answer ${tool} in time`);
      }
      throw new HttpError(502, 'device_error', `device refused ${tool}: ${(error as Error).message}`);
    }
  };

  app.get('/device/admin/devices', async () => ({
    devices: registry.list().map((session) => ({
      device_id: session.deviceId,
      session_id: session.sessionId,
      client_id: session.info.clientId,
      protocol_version: session.info.binaryVersion,
      connected_at: new Date(session.connectedAt).toISOString(),
      robot_state: options.conversationOf(session)?.robotState ?? null,
      tools: session.tools.map((tool) => tool.name),
    })),
  }));

  app.post('/device/admin/inject-text', async (request) => {
    const body = parseBody(schemas.text, request.body);
    const { session, conversation: c } = conversation(body.device_id);
    c.inject(body.text);
    return { ok: true, device_id: session.deviceId };
  });

  app.post('/device/admin/say', async (request) => {
    const body = parseBody(schemas.text, request.body);
    const { session, conversation: c } = conversation(body.device_id);
    c.say(body.text);
    return { ok: true, device_id: session.deviceId };
  });

  app.post('/device/admin/abort', async (request) => {
    const body = parseBody(schemas.device, request.body);
    const { session, conversation: c } = conversation(body.device_id);
    const busy = c.turnState.replying !== null || c.turnState.recognizing !== null;
    c.abort('admin');
    return { ok: true, device_id: session.deviceId, aborted: busy };
  });

  app.get('/device/admin/songs', async () => ({
    songs: (await options.assets.list()).map((a) => ({ name: a.name, file: a.file, bytes: a.bytes })),
  }));

  app.post('/device/admin/play-asset', async (request) => {
    const body = parseBody(schemas.asset, request.body);
    // A name that could leave the songs folder is bad input whether or not a device is connected.
    if (!isSafeAssetName(body.name)) {
      throw new HttpError(400, 'unsafe_name', 'asset names are plain file names inside the songs folder');
    }
    const { session, conversation: c } = conversation(body.device_id);
    try {
      const asset = await options.assets.find(body.name);
      // Decoded before answering so a file that cannot play is a 422, not a 200 followed by silence.
      await options.assets.decode(asset, ASSET_DECODE_RATE_HZ);
      c.playAsset(asset.name);
      return { ok: true, device_id: session.deviceId, name: asset.name };
    } catch (error) {
      if (error instanceof AssetError) throw assetHttpError(error);
      throw error;
    }
  });

  app.post('/device/admin/take-photo', async (request) => {
    const body = parseBody(schemas.photo, request.body);
    return callTool(body.device_id, 'self.camera.take_photo', {
      question: body.question ?? 'Describe what you see.',
    });
  });

  app.post('/device/admin/set-head-angles', async (request) => {
    const { device_id, ...angles } = parseBody(schemas.head, request.body);
    return callTool(device_id, 'self.robot.set_head_angles', angles);
  });

  app.post('/device/admin/set-state', async (request) => {
    const body = parseBody(schemas.state, request.body);
    const reply = await callTool(body.device_id, 'self.robot.set_state', { state: body.state });
    const c = options.conversationOf(pick(body.device_id));
    if (c) c.robotState = body.state;
    return reply;
  });

  app.post('/device/admin/set-toggle', async (request) => {
    const body = parseBody(schemas.toggle, request.body);
    if (body.device_id) pick(body.device_id); // an unknown device fails before anything changes
    if (body.name === 'smart_mode' && options.inProcessSmartMode && options.llm instanceof TwoTierLlm) {
      try {
        options.llm.setSmartMode(body.enabled); // fails fast without a cloud key; nothing changes
      } catch (error) {
        if (error instanceof ProviderConfigError) throw new HttpError(409, error.code, error.message);
        throw error;
      }
    }
    options.toggles[body.name] = body.enabled;
    const applied = { ok: true, name: body.name, enabled: body.enabled, model: activeModel(options.llm) };
    // Toggles are global: without a device_id every connected robot gets the pip.
    const targets = body.device_id ? [pick(body.device_id)] : registry.list();
    const devices = await Promise.all(
      targets.map(async (session) => {
        try {
          await session.mcp.callTool(
            'self.robot.set_toggle',
            { name: body.name, enabled: body.enabled },
            { timeoutMs: options.mcpTimeoutMs },
          );
          return { device_id: session.deviceId, ok: true };
        } catch (error) {
          return { device_id: session.deviceId, ok: false, error: (error as Error).message };
        }
      }),
    );
    if (body.device_id && devices[0] && !devices[0].ok) {
      throw new HttpError(502, 'device_error', `device refused self.robot.set_toggle: ${devices[0].error}`);
    }
    return { ...applied, devices };
  });

  // The last seconds the device's microphone sent while in security mode, as a WAV (base64).
  app.post('/device/admin/capture-audio', async (request) => {
    const body = parseBody(schemas.capture, request.body);
    const session = pick(body.device_id);
    const pcm = options.recorderOf?.(session)?.last(body.seconds) ?? new Int16Array(0);
    if (pcm.length === 0)
      throw new HttpError(409, 'no_audio', 'nothing recorded: the device sent no audio in security mode');
    return {
      ok: true,
      device_id: session.deviceId,
      seconds: pcm.length / 16_000,
      wav_base64: encodeWav(pcm, 16_000).toString('base64'),
    };
  });

  app.post('/device/admin/set-tier1slim-model', async (request) => {
    const body = parseBody(schemas.model, request.body);
    if (!(options.llm instanceof TwoTierLlm)) {
      throw new HttpError(409, 'not_two_tier', `the active LLM provider is ${options.llm.name}, not TwoTier`);
    }
    try {
      // The provider decides what counts as blank (whitespace-only included) and refuses it over a real key.
      options.llm.hotSwap({ model: body.model, url: body.url, apiKey: body.api_key });
    } catch (error) {
      if (error instanceof ProviderConfigError) throw new HttpError(409, error.code, error.message);
      throw error;
    }
    return { ok: true, model: activeModel(options.llm) };
  });

  app.post('/device/admin/set-face-identified', async (request) => {
    const body = parseBody(schemas.device, request.body);
    return callTool(body.device_id, 'self.robot.set_face_identified', {});
  });
}

/** The downlink rate the conversation decodes assets at: the same rate, so its decode is the cached one. */
const ASSET_DECODE_RATE_HZ = 24_000;

const ASSET_ERRORS = {
  unsafe_name: [400, 'unsafe_name'],
  not_found: [404, 'unknown_asset'],
  undecodable: [422, 'undecodable_asset'],
} as const;

function assetHttpError(error: AssetError): HttpError {
  const [status, code] = ASSET_ERRORS[error.code];
  return new HttpError(status, code, error.message);
}
