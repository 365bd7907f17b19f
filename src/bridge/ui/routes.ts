// The LAN dashboard (/ui) and the LED ring mirror (/ui/led-ring-mirror). SKELETON: the helper building
// issue 7's dashboard replaces the body; the exported names and shapes below are what the bridge wires up.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../../util/log.js';
import type { Calendar } from '../calendar/index.js';
import type { Controls } from '../controls.js';
import type { Perception } from '../perception/index.js';
import type { TurnLog } from '../turns.js';

export interface UiOptions {
  /** '' = the dashboard is read-only (no login, every mutation 403). */
  password: string;
  sessionTtlSec: number;
  perception: Perception;
  controls: Controls;
  turns: TurnLog;
  /** Devices connected to the voice server now (GET {VOICE_URL}/device/admin/devices); throws when down. */
  connectedDevices: () => Promise<Array<Record<string, unknown>>>;
  calendar: Calendar;
  logger: Logger;
  /** Epoch ms (default Date.now). */
  now?: () => number;
}

export function registerUiRoutes(_app: FastifyInstance, _options: UiOptions): void {}
