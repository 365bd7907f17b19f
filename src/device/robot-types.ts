// The virtual robot's public interface types: its options (defaults are applied where each is used: the boot
// settings in boot.ts, the rest in robot.ts) and the events it emits.
import type { Clock } from '../audio/pacer.js';
import type { BinaryVersion, ServerFrame } from '../protocol/index.js';

export interface VirtualRobotOptions {
  otaUrl: string;
  deviceId?: string;
  clientId?: string;
  boardType?: string;
  firmwareVersion?: string;
  /** Folder for persisted device state (flash, client id); none = in memory only. */
  stateDir?: string;
  /** The firmware's clock (scenarios may use a fake one). */
  clock?: Clock;
  /** talk → idle this long after the face is lost (FACE_LOST_GRACE_MS). */
  faceLostGraceMs?: number;
  /** Binary protocol version; the OTA response's websocket.version overrides it, as on the device. */
  protocolVersion?: BinaryVersion;
  serialNumber?: string;
  hmacKey?: string;
  retryBaseMs?: number;
  maxBootAttempts?: number;
  helloTimeoutMs?: number;
  mcpPageBytes?: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export interface ReceivedFrame {
  at: number;
  frame: ServerFrame;
}

export interface RobotEvents {
  frame: [ServerFrame];
  audio: [Int16Array];
  /** A reply ended (tts stop): all PCM decoded since tts start. */
  reply: [{ pcm: Int16Array; sentences: string[] }];
  rebooting: [];
  /** The channel is open and the server said hello (the session id). */
  connected: [string];
  disconnected: [number];
  /** Every firmware event (state_changed, chat_status…), also while the channel is closed and it is not sent. */
  perception: [string, Record<string, unknown>];
}
