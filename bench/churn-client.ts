// One connect → hello → (audio) → disconnect cycle of the churn run, on a bare `ws` client: the same upgrade
// headers, hello and binary framing as the firmware (src/device/robot.ts), without OTA or Opus decoding, so
// thousands of cycles cost the client little and the server does all the work it does for a real device.
import WebSocket, { type RawData } from 'ws';
import { type BinaryVersion, encodeBinary } from '../src/protocol/index.js';

/** hello: handshake only; auto: listen start/packets/stop under the VAD; manual: the stop ends an utterance,
 * so recognition and a reply start and the disconnect cuts them somewhere along the way. */
export type CycleKind = 'hello' | 'auto' | 'manual';

export interface CyclePlan {
  url: string;
  deviceId: string;
  clientId: string;
  version: BinaryVersion;
  kind: CycleKind;
  /** Drop TCP without a Close frame (the device losing Wi-Fi) instead of a clean close handshake. */
  abrupt: boolean;
  packets: Uint8Array[];
  /** How long to stay after listen stop (manual): lands the drop in ASR, LLM, TTS or playout. */
  lingerMs: number;
  timeoutMs: number;
}

export type CycleOutcome =
  | { ok: true; serverClosed?: number }
  | { ok: false; stage: 'connect' | 'hello' | 'close'; error: string; timeout: boolean };

class CycleError extends Error {
  constructor(
    readonly stage: 'connect' | 'hello' | 'close',
    message: string,
    readonly timeout = false,
  ) {
    super(message);
  }
}

export async function runCycle(plan: CyclePlan): Promise<CycleOutcome> {
  const ws = new WebSocket(plan.url, {
    headers: {
      'Protocol-Version': String(plan.version),
      'Device-Id': plan.deviceId,
      'Client-Id': plan.clientId,
    },
    perMessageDeflate: false,
    handshakeTimeout: plan.timeoutMs,
  });
  let serverClosed: number | undefined;
  let closed = false;
  const onClose = new Promise<number>((resolve) =>
    ws.once('close', (code) => {
      closed = true;
      resolve(code);
    }),
  );
  // Errors after the handshake (a reset while we drop) end in 'close' too; only their count matters.
  ws.on('error', () => undefined);
  try {
    await stage('connect', plan.timeoutMs, (resolve, reject) => {
      ws.once('open', () => resolve(undefined));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) =>
        reject(new Error(`upgrade refused: HTTP ${res.statusCode}`)),
      );
    });
    const sessionId = await stage<string>('hello', plan.timeoutMs, (resolve, reject) => {
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        const frame = parse(data);
        if (frame?.type === 'hello') resolve(String(frame.session_id ?? ''));
        if (frame?.type === 'mcp') answerMcp(ws, frame);
      });
      void onClose.then((code) => reject(new Error(`closed by the server (${code}) before hello`)));
      send(ws, {
        type: 'hello',
        version: plan.version,
        features: { mcp: true, aec: false },
        transport: 'websocket',
        audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
      });
    });
    if (plan.kind !== 'hello') {
      const mode = plan.kind;
      send(ws, { session_id: sessionId, type: 'listen', state: 'start', mode });
      for (const [i, packet] of plan.packets.entries())
        if (!closed) ws.send(encodeBinary(plan.version, packet, { timestampMs: i * 60 }), { binary: true });
      send(ws, { session_id: sessionId, type: 'listen', state: 'stop', mode });
      if (plan.kind === 'manual' && plan.lingerMs > 0) await Promise.race([sleep(plan.lingerMs), onClose]);
    }
    if (closed) serverClosed = await onClose;
    if (plan.abrupt) {
      ws.terminate();
    } else if (!closed) {
      ws.close(1000, 'bye');
      // The server answers the Close frame and ends TCP; one that does not is a finding, not a hang.
      await stage('close', plan.timeoutMs, (resolve) => void onClose.then(resolve));
    }
    return serverClosed === undefined ? { ok: true } : { ok: true, serverClosed };
  } catch (error) {
    ws.terminate();
    const e = error instanceof CycleError ? error : new CycleError('connect', String(error));
    return { ok: false, stage: e.stage, error: e.message, timeout: e.timeout };
  } finally {
    ws.removeAllListeners('message');
  }
}

function stage<T>(
  name: 'connect' | 'hello' | 'close',
  timeoutMs: number,
  body: (resolve: (value: T) => void, reject: (error: Error) => void) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new CycleError(name, `${name} timed out`, true)), timeoutMs);
    body(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(new CycleError(name, error.message.split('\n')[0] ?? 'error'));
      },
    );
  });
}

type Frame = Record<string, unknown> & { type?: unknown };

function parse(data: RawData): Frame | undefined {
  try {
    const value: unknown = JSON.parse(data.toString());
    return typeof value === 'object' && value !== null ? (value as Frame) : undefined;
  } catch {
    return undefined;
  }
}

function send(ws: WebSocket, frame: Record<string, unknown>): void {
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
}

/** Answers MCP discovery as a device with no tools, so the server's `ready` path runs every cycle. */
function answerMcp(ws: WebSocket, frame: Frame): void {
  const payload = frame.payload as { id?: unknown; method?: unknown } | undefined;
  if (typeof payload?.id !== 'number') return;
  const result =
    payload.method === 'initialize'
      ? {
          protocolVersion: '2024-11-05',
          capabilities: { tools: {} },
          serverInfo: { name: 'deskbot-churn', version: '1.0.0' },
        }
      : payload.method === 'tools/list'
        ? { tools: [] }
        : undefined;
  const reply = result ? { result } : { error: { code: -32601, message: 'no such method' } };
  send(ws, {
    session_id: frame.session_id,
    type: 'mcp',
    payload: { jsonrpc: '2.0', id: payload.id, ...reply },
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
