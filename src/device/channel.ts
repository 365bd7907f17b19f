// Opening the robot's audio channel: the WebSocket upgrade with the firmware's headers, and waiting for a server
// frame. Failures become one-line ChannelErrors (the CLI prints them as they are; no stack trace).
import WebSocket from 'ws';
import type { ServerFrame } from '../protocol/index.js';

/** The channel could not be opened (server unreachable, upgrade refused, no hello). */
export class ChannelError extends Error {
  constructor(
    message: string,
    /** HTTP status of a refused upgrade (401/403 mean the OTA token is stale or missing). */
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface ChannelHeaders {
  protocolVersion: number;
  deviceId: string;
  clientId: string;
  /** From the OTA response; sent as a Bearer token unless it already names a scheme. */
  token?: string;
}

/** The WebSocket once open; rejects with a ChannelError. */
export function openSocket(url: string, identity: ChannelHeaders): Promise<WebSocket> {
  const headers: Record<string, string> = {
    'Protocol-Version': String(identity.protocolVersion),
    'Device-Id': identity.deviceId,
    'Client-Id': identity.clientId,
  };
  const token = identity.token;
  if (token) headers.Authorization = token.includes(' ') ? token : `Bearer ${token}`;
  const socket = new WebSocket(url, { headers, perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(socket));
    // `on`, not `once`: terminating a refused upgrade emits one more error, which must not go unheard.
    socket.on('error', (error) => reject(new ChannelError(`cannot open ${url}: ${error.message}`)));
    socket.once('unexpected-response', (_request, response) => {
      reject(new ChannelError(`upgrade refused: HTTP ${response.statusCode}`, response.statusCode));
      socket.terminate();
    });
  });
}

/** A frame subscription: `subscribe(listener)` starts it and returns its unsubscribe. */
export type FrameSubscribe = (listener: (frame: ServerFrame) => void) => () => void;

/** Resolves with the next frame that matches `predicate`; rejects after timeoutMs. */
export function nextFrame(
  subscribe: FrameSubscribe,
  predicate: (frame: ServerFrame) => boolean,
  timeoutMs: number,
): Promise<ServerFrame> {
  return new Promise((resolve, reject) => {
    const unsubscribe = subscribe((frame) => {
      if (!predicate(frame)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(frame);
    });
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no matching frame within ${timeoutMs} ms`));
    }, timeoutMs);
  });
}
