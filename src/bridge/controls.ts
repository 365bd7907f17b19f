// The bridge's robot controls: kid mode, smart mode and robot state. The admin routes (loopback) and the
// dashboard (password + CSRF) call the same functions, so a flip behaves the same wherever it comes from.
import type { RobotState } from '../robot/states.js';
import { HttpError } from '../util/http-error.js';
import type { Toggles } from '../voice/toggles.js';
import type { TogglesStore } from './toggles-store.js';
import { VoiceCallError, type VoiceClient } from './voice-client.js';

export interface ControlsOptions {
  toggles: TogglesStore;
  voice: Pick<VoiceClient, 'post'>;
  /** VOICE_PROVIDER=twotier: the voice server flips its model in-process when the smart pip is pushed. */
  inProcessSmartMode: boolean;
  cloudKeyPresent: () => boolean;
  /** Restarts the agent runtime with a model (smart mode in agent mode). */
  restartAgent: (model?: string) => Promise<void>;
  smartModel: string;
  /** The agent's model now (config, or the /admin/model override). */
  agentModel: () => string;
  /** Told after every change that landed (metrics). */
  onToggleChanged?: (name: keyof Toggles, enabled: boolean) => void;
}

export interface ToggleResult {
  ok: true;
  toggles: Toggles;
  pushed: boolean;
  push_error?: string;
}

export interface Controls {
  setKidMode(enabled: boolean, deviceId?: string): Promise<ToggleResult>;
  /** 409 `no_cloud_key` when turning on without a cloud key; a failed flip restores the previous value. */
  setSmartMode(enabled: boolean, deviceId?: string): Promise<ToggleResult>;
  setState(state: RobotState, deviceId?: string): Promise<Record<string, unknown>>;
  toggles(): Readonly<Toggles>;
}

export function createControls(options: ControlsOptions): Controls {
  /** Pushes a pip to the robot; the toggle is already persisted, so a missing robot is reported, not fatal. */
  const pushPip = async (name: keyof Toggles, enabled: boolean, device?: string) => {
    try {
      await options.voice.post('set-toggle', { name, enabled, ...(device ? { device_id: device } : {}) });
      return { pushed: true };
    } catch (error) {
      if (error instanceof VoiceCallError && error.status === 409)
        throw new HttpError(409, error.code, error.message);
      return { pushed: false, push_error: (error as Error).message };
    }
  };
  const changed = (name: keyof Toggles, before: boolean, after: boolean) => {
    if (before !== after) options.onToggleChanged?.(name, after);
  };

  return {
    toggles: () => options.toggles.get(),

    async setKidMode(enabled, deviceId) {
      const before = options.toggles.get().kid_mode;
      const toggles = await options.toggles.set('kid_mode', enabled);
      changed('kid_mode', before, enabled);
      return { ok: true, toggles, ...(await pushPip('kid_mode', enabled, deviceId)) };
    },

    async setSmartMode(enabled, deviceId) {
      if (enabled && !options.cloudKeyPresent()) {
        throw new HttpError(
          409,
          'no_cloud_key',
          'smart mode needs a cloud API key: set TWOTIER_CLOUD_API_KEY (or CLOUD_ROUTER_API_KEY)',
        );
      }
      const previous = options.toggles.get().smart_mode;
      const toggles = await options.toggles.set('smart_mode', enabled);
      try {
        const pushed = await pushPip('smart_mode', enabled, deviceId);
        // In agent mode the model switch is a configuration change: restart the runtime on the new model.
        if (!options.inProcessSmartMode)
          await options.restartAgent(enabled ? options.smartModel : options.agentModel());
        changed('smart_mode', previous, enabled);
        return { ok: true, toggles, ...pushed };
      } catch (error) {
        await options.toggles.set('smart_mode', previous); // the flip failed: nothing changes
        throw error;
      }
    },

    async setState(state, deviceId) {
      try {
        return await options.voice.post('set-state', { state, ...(deviceId ? { device_id: deviceId } : {}) });
      } catch (error) {
        if (error instanceof VoiceCallError) throw new HttpError(error.status, error.code, error.message);
        throw error;
      }
    },
  };
}
