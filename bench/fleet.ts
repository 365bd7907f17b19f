// The virtual robots: booted through OTA, connected, streaming the precomputed Opus utterance in real time
// (60 ms per packet, absolute schedule so nothing drifts) and timing what comes back.
import { setTimeout as delay } from 'node:timers/promises';
import { VirtualRobot } from '../src/device/robot.js';
import type { ServerFrame } from '../src/protocol/index.js';
import { UPLINK_FRAME_MS, type Utterance } from './audio.js';

/** What one robot saw of one turn, on this process's clock. */
export interface ClientTurn {
  ok: boolean;
  /** When the packet that ends the utterance (per the offline VAD) was sent. */
  endPacketSentAt?: number;
  /** Arrival times of the reply's audio packets (after tts start). */
  audioAt: number[];
}

export function benchMac(index: number): string {
  return `02:be:00:00:${((index >> 8) & 0xff).toString(16).padStart(2, '0')}:${(index & 0xff).toString(16).padStart(2, '0')}`;
}

/** Boots and connects `count` robots, `parallel` at a time. */
export async function startRobots(otaUrl: string, count: number, parallel = 10): Promise<VirtualRobot[]> {
  const robots: VirtualRobot[] = [];
  for (let i = 0; i < count; i++) {
    robots.push(new VirtualRobot({ otaUrl, deviceId: benchMac(i), retryBaseMs: 50, maxBootAttempts: 5 }));
  }
  let next = 0;
  const worker = async () => {
    while (next < robots.length) {
      const robot = robots[next++]!;
      // A busy server can miss one hello deadline while hundreds connect; two misses are a real failure.
      for (let attempt = 1; ; attempt++) {
        try {
          await robot.start();
          break;
        } catch (error) {
          if (attempt >= 3)
            throw new Error(`robot ${robot.deviceId} did not connect: ${(error as Error).message}`);
          await delay(500 * attempt);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker));
  return robots;
}

export function stopRobots(robots: VirtualRobot[]): void {
  for (const robot of robots) robot.disconnect();
}

/** A wait that grows with the fleet: `perDeviceMs` per device, never below `baseMs`. */
export function scaledMs(baseMs: number, devices: number, perDeviceMs: number): number {
  return Math.max(baseMs, devices * perDeviceMs);
}

/** Polls `check` every 20 ms until it holds or `timeoutMs` passes; returns whether it held. */
export async function waitUntil(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await check()) return true;
    await delay(20);
  }
  return false;
}

/**
 * Sends `packets` one per 60 ms from `startAt` (performance.now()), on an absolute schedule. Returns the
 * send time of each packet. Stops early when `signal` aborts or the robot is gone.
 */
export async function streamPackets(
  robot: VirtualRobot,
  packets: Uint8Array[],
  startAt = performance.now(),
  signal?: AbortSignal,
): Promise<number[]> {
  const sentAt: number[] = [];
  for (let i = 0; i < packets.length; i++) {
    const wait = startAt + i * UPLINK_FRAME_MS - performance.now();
    if (wait > 1) await delay(wait);
    if (signal?.aborted || !robot.connected) break;
    sentAt.push(performance.now());
    robot.sendAudioPacket(packets[i]!, i * UPLINK_FRAME_MS);
  }
  return sentAt;
}

/**
 * One turn: listen start, say the utterance, wait for the reply to end (tts stop). `timeoutMs` counts from
 * the last packet sent, so a server whose VAD runs behind is timed, not cut off.
 */
export async function doTurn(
  robot: VirtualRobot,
  utterance: Utterance,
  timeoutMs: number,
): Promise<ClientTurn> {
  const audioAt: number[] = [];
  const onFrame = (frame: ServerFrame) => {
    if (frame.type === 'tts' && frame.state === 'start') audioAt.length = 0;
  };
  const onAudio = () => audioAt.push(performance.now());
  let onReply: () => void = () => {};
  robot.on('frame', onFrame);
  robot.on('audio', onAudio);
  let timer: NodeJS.Timeout | undefined;
  let timedOut: () => void = () => {};
  const replied = new Promise<boolean>((resolve) => {
    onReply = () => resolve(true);
    timedOut = () => resolve(false);
    robot.once('reply', onReply);
  });
  try {
    robot.listen('start', 'auto');
    const sentAt = await streamPackets(robot, utterance.packets);
    timer = setTimeout(timedOut, timeoutMs);
    const ok = await replied;
    const endPacketSentAt = utterance.endPacket >= 0 ? sentAt[utterance.endPacket] : undefined;
    return { ok, audioAt: [...audioAt], ...(endPacketSentAt !== undefined ? { endPacketSentAt } : {}) };
  } finally {
    clearTimeout(timer);
    robot.off('frame', onFrame);
    robot.off('audio', onAudio);
    robot.off('reply', onReply);
  }
}

export interface Jitter {
  /** |interval − 60| for every packet after the pre-buffer. */
  deviations: number[];
  /** Highest (packets received − elapsed / 60 ms) during the reply: the device queue depth bound. */
  maxAhead: number;
  packets: number;
}

/** Downlink timing of one reply as the device sees it; the first `prebuffer` packets come in a burst. */
export function jitterOf(audioAt: number[], prebuffer = 5): Jitter {
  const deviations: number[] = [];
  let maxAhead = 0;
  const first = audioAt[0];
  for (let i = 0; i < audioAt.length; i++) {
    const at = audioAt[i]!;
    if (i >= prebuffer) deviations.push(Math.abs(at - audioAt[i - 1]! - UPLINK_FRAME_MS));
    if (first !== undefined) maxAhead = Math.max(maxAhead, i + 1 - (at - first) / UPLINK_FRAME_MS);
  }
  return { deviations, maxAhead, packets: audioAt.length };
}
