// The virtual robot's MCP tool surface, with the firmware's names and input schemas.

import {
  ROBOT_STATES,
  type RobotState as RobotStateName,
  TOGGLE_NAMES as TOGGLES,
  type ToggleName,
} from '../robot/states.js';
import type { DeviceTool } from './mcp-server.js';

export type Rgb = [number, number, number];

/** What the tools read and change. The robot owns it; later the firmware emulation drives it. */
export interface DeviceModel {
  volume: number;
  brightness: number;
  theme: string;
  head: { yaw: number; pitch: number };
  state: RobotStateName;
  toggles: Record<ToggleName, boolean>;
  /** Left ring (pixels 0-5) as last written by the LED tools. */
  leftRing: Rgb[];
  faceIdentifiedAt: number | null;
  cameraEnabled: boolean;
  micEnabled: boolean;
}

export function initialModel(): DeviceModel {
  return {
    volume: 70,
    brightness: 75,
    theme: 'light',
    head: { yaw: 0, pitch: 0 },
    state: 'idle',
    toggles: { kid_mode: false, smart_mode: false },
    leftRing: Array.from({ length: 6 }, () => [0, 0, 0] as Rgb),
    faceIdentifiedAt: null,
    cameraEnabled: true,
    micEnabled: true,
  };
}

export interface ToolHooks {
  /** Called after a change so the robot can persist, repaint and emit events. */
  changed?: (what: string) => void;
  reboot?: () => void;
  now?: () => number;
  deviceStatus?: () => Record<string, unknown>;
  /** The firmware's state machine takes state changes (else the model is set directly). */
  setState?: (state: RobotStateName) => void;
  /** Takes a photo and returns the vision reply; the camera tool exists only when this is given. */
  takePhoto?: (question: string) => Promise<string>;
}

const int = (min: number, max: number, description: string) => ({
  type: 'integer',
  minimum: min,
  maximum: max,
  description,
});
const object = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object',
  properties,
  required,
});

export function buildTools(model: DeviceModel, hooks: ToolHooks = {}): DeviceTool[] {
  const changed = (what: string) => hooks.changed?.(what);
  const ok = (value: unknown = true) => JSON.stringify(value);
  return [
    {
      name: 'self.get_device_status',
      description:
        'Provides the real-time information of the device, including the current status of the audio speaker, ' +
        'screen, battery, network, head servos, robot state and toggles. Use this tool before answering ' +
        'questions about the device or before changing a setting relative to its current value.',
      inputSchema: object({}),
      call: () =>
        ok({
          audio_speaker: { volume: model.volume },
          screen: { brightness: model.brightness, theme: model.theme },
          head: model.head,
          robot: { state: model.state, ...model.toggles },
          ...(hooks.deviceStatus?.() ?? {}),
        }),
    },
    {
      name: 'self.audio_speaker.set_volume',
      description:
        'Set the volume of the audio speaker. If the current volume is unknown, call self.get_device_status first.',
      inputSchema: object({ volume: int(0, 100, 'volume in percent') }, ['volume']),
      call: (args) => {
        model.volume = args.volume as number;
        changed('volume');
        return ok();
      },
    },
    {
      name: 'self.screen.set_brightness',
      description: 'Set the brightness of the screen.',
      inputSchema: object({ brightness: int(0, 100, 'brightness in percent') }, ['brightness']),
      call: (args) => {
        model.brightness = args.brightness as number;
        changed('brightness');
        return ok();
      },
    },
    {
      name: 'self.screen.set_theme',
      description: 'Set the theme of the screen. The theme can be `light` or `dark`.',
      inputSchema: object({ theme: { type: 'string' } }, ['theme']),
      call: (args) => {
        if (args.theme !== 'light' && args.theme !== 'dark') throw new Error('Invalid theme');
        model.theme = args.theme;
        changed('theme');
        return ok();
      },
    },
    ...(hooks.takePhoto
      ? [
          {
            name: 'self.camera.take_photo',
            description:
              'Take a photo with the camera and ask a question about it. Use it when the user asks what you see.',
            inputSchema: object(
              { question: { type: 'string', description: 'what to find out about the photo' } },
              ['question'],
            ),
            call: (args: Record<string, unknown>) => {
              if (!model.cameraEnabled) throw new Error('The camera is disabled');
              return hooks.takePhoto!(String(args.question));
            },
          } satisfies DeviceTool,
        ]
      : []),
    {
      name: 'self.robot.set_led_color',
      description:
        'Set every pixel of the left LED ring (the state arc, pixels 0-5) to one colour. The right ring ' +
        '(pixels 6-11) shows indicators owned by the firmware and cannot be written.',
      inputSchema: object(
        { red: int(0, 255, 'red'), green: int(0, 255, 'green'), blue: int(0, 255, 'blue') },
        ['red', 'green', 'blue'],
      ),
      call: (args) => {
        const rgb: Rgb = [args.red as number, args.green as number, args.blue as number];
        model.leftRing = model.leftRing.map(() => [...rgb] as Rgb);
        changed('led');
        return ok();
      },
    },
    {
      name: 'self.robot.set_led_multi',
      description:
        'Set individual pixels of the left LED ring. `pixels` is an array of {index, red, green, blue} with ' +
        'index 0-5. Writes to the right ring (6-11) are rejected.',
      inputSchema: object({ pixels: { type: 'array', description: 'array of {index, red, green, blue}' } }, [
        'pixels',
      ]),
      call: (args) => {
        const pixels = args.pixels as Array<Record<string, unknown>>;
        for (const pixel of pixels) {
          const index = pixel?.index;
          if (!Number.isInteger(index) || (index as number) < 0 || (index as number) > 11) {
            throw new Error('Invalid pixel index');
          }
          if ((index as number) > 5)
            throw new Error(`Pixel ${index} belongs to the right ring and cannot be written`);
        }
        for (const pixel of pixels) {
          model.leftRing[pixel.index as number] = [
            clampByte(pixel.red),
            clampByte(pixel.green),
            clampByte(pixel.blue),
          ];
        }
        changed('led');
        return ok();
      },
    },
    {
      name: 'self.robot.set_head_angles',
      description:
        'Move the head. yaw turns left (negative) or right (positive); pitch tilts down (negative) or up.',
      inputSchema: object({ yaw: int(-90, 90, 'degrees'), pitch: int(-45, 45, 'degrees') }),
      call: (args) => {
        if (typeof args.yaw === 'number') model.head.yaw = args.yaw;
        if (typeof args.pitch === 'number') model.head.pitch = args.pitch;
        changed('head');
        return ok();
      },
    },
    {
      name: 'self.robot.get_head_angles',
      description: 'Read the current head angles in degrees.',
      inputSchema: object({}),
      call: () => ok(model.head),
    },
    {
      name: 'self.robot.get_privacy_state',
      description: 'Tell whether the camera and the microphone are enabled.',
      inputSchema: object({}),
      call: () => ok({ camera_enabled: model.cameraEnabled, mic_enabled: model.micEnabled }),
    },
    {
      name: 'self.robot.set_face_identified',
      description: 'Light the face pip green: the bridge has identified the face in view. Expires after 4 s.',
      inputSchema: object({}),
      call: () => {
        model.faceIdentifiedAt = (hooks.now ?? Date.now)();
        changed('face_identified');
        return ok();
      },
    },
    {
      name: 'self.robot.set_state',
      description: `Set the robot state. One of: ${ROBOT_STATES.join(', ')}.`,
      inputSchema: object({ state: { type: 'string', enum: [...ROBOT_STATES] } }, ['state']),
      call: (args) => {
        if (!(ROBOT_STATES as readonly string[]).includes(args.state as string))
          throw new Error('Invalid state');
        if (model.state !== args.state) {
          if (hooks.setState) hooks.setState(args.state as RobotStateName);
          else model.state = args.state as RobotStateName;
          changed('state');
        }
        return ok({ state: model.state });
      },
    },
    {
      name: 'self.robot.set_toggle',
      description: 'Turn a toggle on or off. name is kid_mode or smart_mode.',
      inputSchema: object({ name: { type: 'string', enum: [...TOGGLES] }, enabled: { type: 'boolean' } }, [
        'name',
        'enabled',
      ]),
      call: (args) => {
        if (!(TOGGLES as readonly string[]).includes(args.name as string)) throw new Error('Invalid toggle');
        model.toggles[args.name as ToggleName] = args.enabled as boolean;
        changed('toggle');
        return ok(model.toggles);
      },
    },
    {
      name: 'self.robot.get_state',
      description: 'Read the robot state and toggles.',
      inputSchema: object({}),
      call: () => ok({ state: model.state, ...model.toggles }),
    },
    {
      name: 'self.reboot',
      description: 'Reboot the device. Only for the owner.',
      inputSchema: object({}),
      userOnly: true,
      call: () => {
        setTimeout(() => hooks.reboot?.(), 100);
        return ok();
      },
    },
    {
      name: 'self.get_system_info',
      description: 'Firmware, board and memory information. Only for the owner.',
      inputSchema: object({}),
      userOnly: true,
      call: () => ok(hooks.deviceStatus?.() ?? {}),
    },
  ];
}

function clampByte(value: unknown): number {
  const n = typeof value === 'number' && Number.isFinite(value) ? Math.round(value) : 0;
  return Math.min(255, Math.max(0, n));
}
