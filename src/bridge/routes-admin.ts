// Bridge admin routes (SPEC "Bridge admin routes"): loopback peers only, everyone else gets 403.
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { MemoryStore } from '../agent/memory.js';
import { PERSONA_FILES } from '../agent/workspace.js';
import { canonicalDeviceId } from '../protocol/index.js';
import { ROBOT_STATES } from '../robot/states.js';
import { writeFileAtomic } from '../util/atomic-file.js';
import { HttpError, parseBody } from '../util/http-error.js';
import { isUnderPrefix } from '../util/path-guard.js';
import type { AllowList } from './allow-list.js';
import type { Controls } from './controls.js';
import { loopbackOnly } from './loopback.js';
import type { TogglesStore } from './toggles-store.js';
import { VoiceCallError, type VoiceClient } from './voice-client.js';

export interface AdminRouteOptions {
  /** Host names besides loopback ones that /admin/* requests may be addressed to (bridge.admin_hosts). */
  adminHosts?: readonly string[];
  controls: Controls;
  toggles: TogglesStore;
  voice: VoiceClient;
  workspaceDir: string;
  memory: () => Promise<MemoryStore>;
  allowList: AllowList;
  /** The voice daemon's live endpoint, for /admin/model {daemon: voice}. */
  voiceEndpoint: (smart: boolean) => { url: string; apiKey: string };
  /** Restarts the agent runtime with a model (the agent daemon). */
  restartAgent: (model?: string) => Promise<void>;
  saveModelOverride: (daemon: 'voice' | 'agent', model: string) => Promise<void>;
}

const deviceId = z.string().min(1).max(64).transform(canonicalDeviceId).optional();
const schemas = {
  toggle: z.object({ enabled: z.boolean(), device_id: deviceId }),
  persona: z.object({ file: z.string().max(64), content: z.string().max(256 * 1024) }),
  model: z.object({ daemon: z.enum(['voice', 'agent']), model: z.string().trim().min(1).max(200) }),
  safety: z.object({ action: z.enum(['add', 'remove']), tool: z.string().max(120) }),
  state: z.object({ state: z.enum(ROBOT_STATES), device_id: deviceId }),
};

export function registerAdminRoutes(app: FastifyInstance, options: AdminRouteOptions): void {
  // Every /admin path, routed or not and whatever the method, is refused to non-loopback peers (no 404 that
  // would tell an outsider which admin routes exist).
  const thisMachineOnly = loopbackOnly(options.adminHosts);
  app.addHook('onRequest', async (request, reply) => {
    // Decided on the path the router matches (percent-decoded, slashes folded), not the raw request line.
    if (isUnderPrefix(request, '/admin')) await thisMachineOnly(request, reply);
  });
  app.register(async (admin) => {
    admin.post('/admin/kid-mode', async (request) => {
      const body = parseBody(schemas.toggle, request.body);
      return options.controls.setKidMode(body.enabled, body.device_id);
    });

    admin.post('/admin/smart-mode', async (request) => {
      const body = parseBody(schemas.toggle, request.body);
      return options.controls.setSmartMode(body.enabled, body.device_id);
    });

    admin.post('/admin/persona', async (request) => {
      const body = parseBody(schemas.persona, request.body);
      if (!(PERSONA_FILES as readonly string[]).includes(body.file)) {
        throw new HttpError(400, 'unknown_persona_file', `file must be one of ${PERSONA_FILES.join(', ')}`);
      }
      // MEMORY.md goes through the memory store, in turn with `remember`, so neither undoes the other.
      if (body.file === 'MEMORY.md') await (await options.memory()).replaceMemoryFile(body.content);
      else await writeFileAtomic(join(options.workspaceDir, body.file), body.content);
      return { ok: true, file: body.file, bytes: Buffer.byteLength(body.content) };
    });

    // One model change at a time, apply then save, in arrival order: two changes interleaved could leave the
    // daemon running one model while models.json names the other (found with 30 concurrent calls).
    let modelChanges: Promise<unknown> = Promise.resolve();
    admin.post('/admin/model', async (request) => {
      const body = parseBody(schemas.model, request.body);
      const change = modelChanges.then(() => applyModel(options, body.daemon, body.model));
      modelChanges = change.catch(() => undefined);
      await change;
      return { ok: true, daemon: body.daemon, model: body.model };
    });

    admin.get('/admin/safety', async () => ({ tools: options.allowList.list() }));
    admin.post('/admin/safety', async (request) => {
      const body = parseBody(schemas.safety, request.body);
      const tools = await options.allowList.apply(body.action, body.tool);
      return { ok: true, tools };
    });

    admin.post('/admin/state', async (request) => {
      const body = parseBody(schemas.state, request.body);
      return options.controls.setState(body.state, body.device_id);
    });
  });
}

/** Sets a daemon's model and saves it once the daemon took it (the agent restarts on it). */
async function applyModel(
  options: AdminRouteOptions,
  daemon: 'voice' | 'agent',
  model: string,
): Promise<void> {
  if (daemon === 'voice') {
    const endpoint = options.voiceEndpoint(options.toggles.get().smart_mode);
    try {
      await options.voice.post('set-tier1slim-model', { model, url: endpoint.url, api_key: endpoint.apiKey });
    } catch (error) {
      if (error instanceof VoiceCallError)
        throw new HttpError(error.status === 409 ? 409 : 502, error.code, error.message);
      throw error;
    }
  }
  await options.saveModelOverride(daemon, model);
  if (daemon === 'agent') await options.restartAgent(model);
}
