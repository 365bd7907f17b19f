// One connected device: the hello handshake, MCP discovery, frame validation and routing.
// It owns no conversation logic; the turn pipeline listens to its events.
import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { RawData, WebSocket } from 'ws';
import { DEFAULT_LIMITS } from '../config/schema.js';
import {
  type BinaryVersion,
  type DeviceHello,
  decodeBinary,
  type EventFrame,
  encodeBinary,
  encodeFrame,
  type ListenFrame,
  McpClient,
  type McpTool,
  PAYLOAD_JSON,
  parseDeviceFrame,
  type ServerFrame,
} from '../protocol/index.js';
import type { LimitName } from '../util/http-app.js';
import { type Logger, ThrottledLog } from '../util/log.js';
import type { RegisteredDevice } from './registry.js';

export interface ConnectInfo {
  deviceId: string;
  clientId: string;
  binaryVersion: BinaryVersion;
  remoteAddress: string;
}

export interface SessionOptions {
  logger: Logger;
  serverVersion: string;
  /** Where the device's camera posts photos, handed over in MCP initialize. */
  visionUrl: string;
  helloTimeoutMs: number;
  idleTimeoutMs: number;
  maxFrameBytes: number;
  mcpTimeoutMs: number;
  /** Downlink audio parameters announced in the server hello; must match what we encode. */
  downlinkSampleRate: number;
  downlinkFrameMs: number;
  /** Above this many bytes queued in the socket, audio is dropped rather than buffered without bound. */
  maxBufferedBytes?: number;
  /** MCP tools kept per list, and their JSON bytes (default `limits.mcp_max_tools` / `mcp_max_tool_list_bytes`). */
  maxTools?: number;
  maxToolListBytes?: number;
  /** Told of a hello timeout or a cut tool list, for `deskbot_voice_limit_refusals_total{limit}`. */
  onLimit?: (limit: LimitName) => void;
}

export interface SessionEvents {
  hello: [DeviceHello];
  /** MCP initialize and the full tools/list have completed. */
  ready: [McpTool[]];
  listen: [ListenFrame];
  abort: [string | undefined];
  audio: [Uint8Array, number];
  event: [EventFrame];
  closed: [];
}

export interface SessionStats {
  textFrames: number;
  audioFrames: number;
  rejectedFrames: number;
  droppedAudioOut: number;
}

export class DeviceSession extends EventEmitter<SessionEvents> implements RegisteredDevice {
  readonly sessionId = randomUUID();
  readonly connectedAt = Date.now();
  readonly visionToken = randomBytes(16).toString('hex');
  readonly mcp: McpClient;
  readonly stats: SessionStats = { textFrames: 0, audioFrames: 0, rejectedFrames: 0, droppedAudioOut: 0 };
  hello: DeviceHello | undefined;
  tools: McpTool[] = [];
  userTools: McpTool[] = [];
  private mcpStarted = false;
  private closed = false;
  /** Settles once the device's tools are known: discovery ended (or failed), or the device offers no MCP. */
  private readonly toolsKnown: Promise<void>;
  private markToolsKnown: () => void = () => {};
  private helloTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly log: Logger;
  private readonly badFrameLog: ThrottledLog;

  constructor(
    private readonly socket: WebSocket,
    readonly info: ConnectInfo,
    private readonly options: SessionOptions,
  ) {
    super();
    this.toolsKnown = new Promise((resolve) => {
      this.markToolsKnown = resolve;
    });
    this.log = options.logger.child({ device: info.deviceId, session: this.sessionId });
    this.badFrameLog = new ThrottledLog(this.log);
    this.mcp = new McpClient({
      send: (payload) => this.sendJson({ type: 'mcp', session_id: this.sessionId, payload }),
      timeoutMs: options.mcpTimeoutMs,
      onNotification: (method) => this.log.debug({ method }, 'device MCP notification'),
    });
    socket.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    // Liveness is any inbound frame: py-xiaozhi pings every 20 s (ws answers the pong itself) between turns,
    // and a client that pings is alive even when it sends no data frame for longer than the idle timeout.
    socket.on('ping', () => this.resetIdleTimer());
    socket.on('pong', () => this.resetIdleTimer());
    socket.on('close', (code, reason) => this.onClose(code, reason.toString()));
    socket.on('error', (error) => this.log.warn({ err: error.message }, 'device socket error'));
    this.helloTimer = setTimeout(() => {
      this.log.warn({ timeoutMs: options.helloTimeoutMs }, 'device sent no hello; closing');
      options.onLimit?.('hello_timeout');
      this.close(4000, 'no hello');
    }, options.helloTimeoutMs);
    this.resetIdleTimer();
  }

  get deviceId(): string {
    return this.info.deviceId;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  sendJson(frame: ServerFrame): boolean {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return false;
    this.socket.send(encodeFrame(frame));
    return true;
  }

  /** Sends one Opus packet in the negotiated binary framing. Returns false when it was dropped. */
  sendAudio(opus: Uint8Array, timestampMs = 0): boolean {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return false;
    if (this.socket.bufferedAmount > (this.options.maxBufferedBytes ?? 1 << 20)) {
      this.stats.droppedAudioOut++;
      return false;
    }
    this.socket.send(encodeBinary(this.info.binaryVersion, opus, { timestampMs }), { binary: true });
    return true;
  }

  close(code = 1000, reason = 'closing'): void {
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) {
      const socket = this.socket;
      socket.close(code, reason);
      // A peer that never answers the Close handshake must not keep its socket open. The timer holds only the
      // socket (not this session) and goes as soon as the socket closes.
      const timer = setTimeout(() => socket.terminate(), 2000);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
    }
    this.onClose(code, reason);
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    try {
      this.resetIdleTimer();
      const bytes = toBytes(data);
      if (bytes.length > this.options.maxFrameBytes) {
        this.reject(
          'oversized_frame',
          `frame of ${bytes.length} bytes exceeds ${this.options.maxFrameBytes}`,
        );
        return;
      }
      if (!isBinary) {
        this.handleText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
        return;
      }
      const packet = decodeBinary(this.info.binaryVersion, bytes);
      if (packet.payloadType === PAYLOAD_JSON) {
        this.handleText(Buffer.from(packet.payload).toString('utf8'));
        return;
      }
      this.stats.audioFrames++;
      this.emit('audio', packet.payload, packet.timestampMs);
    } catch (error) {
      const e = error as { code?: string; message?: string };
      this.reject(e.code ?? 'frame_error', e.message ?? String(error));
    }
  }

  private handleText(text: string): void {
    const result = parseDeviceFrame(text);
    if (result.kind === 'error') {
      this.reject(result.code, result.message);
      return;
    }
    if (result.kind === 'unknown') {
      this.log.debug({ type: result.type }, 'ignoring frame of unknown type');
      return;
    }
    this.stats.textFrames++;
    const frame = result.frame;
    switch (frame.type) {
      case 'hello':
        this.onHello(frame);
        break;
      case 'mcp':
        if (!this.mcp.handleMessage(frame.payload)) this.log.debug('unmatched MCP payload ignored');
        break;
      case 'listen':
        this.emit('listen', frame);
        break;
      case 'abort':
        this.emit('abort', frame.reason);
        break;
      case 'event':
        this.emit('event', frame);
        break;
    }
  }

  private onHello(frame: DeviceHello): void {
    clearTimeout(this.helloTimer);
    this.hello = frame;
    this.sendJson({
      type: 'hello',
      transport: 'websocket',
      session_id: this.sessionId,
      audio_params: {
        format: 'opus',
        sample_rate: this.options.downlinkSampleRate,
        channels: 1,
        frame_duration: this.options.downlinkFrameMs,
      },
    });
    this.log.info({ version: frame.version, features: frame.features }, 'device hello answered');
    this.emit('hello', frame);
    if (frame.features?.mcp && !this.mcpStarted) {
      this.mcpStarted = true;
      void this.discoverTools();
    } else if (!frame.features?.mcp) {
      this.markToolsKnown();
    }
  }

  /**
   * Whether the device offers the tool (regular or user-only). Waits up to `waitMs` for discovery, because a
   * client may send its first words right after hello. Stock firmware, the browser page and py-xiaozhi have no
   * `self.robot.*` tools: asking them would only earn an "Unknown tool" error.
   */
  async offersTool(name: string, waitMs = 3000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.toolsKnown,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, waitMs);
      }),
    ]);
    clearTimeout(timer);
    return this.tools.some((tool) => tool.name === name) || this.userTools.some((tool) => tool.name === name);
  }

  private async discoverTools(): Promise<void> {
    try {
      try {
        await this.mcp.initialize(
          { vision: { url: this.options.visionUrl, token: this.visionToken } },
          this.options.serverVersion,
        );
      } catch (error) {
        // Some clients (an older browser test page) log `initialize` and never answer it, yet list their tools.
        if (this.closed) throw error;
        this.log.info(
          { err: (error as Error).message },
          'device did not answer MCP initialize; listing tools anyway',
        );
      }
      this.tools = await this.listTools(false);
      const all = await this.listTools(true);
      const regular = new Set(this.tools.map((tool) => tool.name));
      this.userTools = all.filter((tool) => !regular.has(tool.name));
      this.log.info(
        { tools: this.tools.length, userTools: this.userTools.length },
        'device MCP tools discovered',
      );
      this.emit('ready', this.tools);
    } catch (error) {
      if (!this.closed) this.log.warn({ err: (error as Error).message }, 'device MCP discovery failed');
    } finally {
      this.markToolsKnown();
    }
  }

  /** One capped tools/list walk; a cut list is logged once and counted (a device once declared 15,120). */
  private async listTools(withUserTools: boolean): Promise<McpTool[]> {
    const caps = {
      maxTools: this.options.maxTools ?? DEFAULT_LIMITS.mcp_max_tools,
      maxBytes: this.options.maxToolListBytes ?? DEFAULT_LIMITS.mcp_max_tool_list_bytes,
    };
    const { tools, cut } = await this.mcp.listToolsCapped(withUserTools, caps);
    if (cut) {
      this.log.warn(
        { kept: tools.length, withUserTools, ...caps },
        `device MCP tool list over its ${cut === 'tools' ? 'tool' : 'byte'} cap; kept what fits`,
      );
      this.options.onLimit?.(cut === 'tools' ? 'mcp_tools' : 'mcp_tool_bytes');
    }
    return tools;
  }

  private reject(code: string, message: string): void {
    this.stats.rejectedFrames++;
    this.badFrameLog.warn({ code }, `rejected device frame: ${message}`);
  }

  private resetIdleTimer(): void {
    clearTimeout(this.idleTimer);
    if (this.closed) return;
    this.idleTimer = setTimeout(() => {
      this.log.info({ idleMs: this.options.idleTimeoutMs }, 'device idle; closing');
      this.close(4002, 'idle');
    }, this.options.idleTimeoutMs);
  }

  private onClose(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.helloTimer);
    clearTimeout(this.idleTimer);
    this.markToolsKnown();
    this.mcp.close('device disconnected');
    this.log.info({ code, reason }, 'device disconnected');
    this.emit('closed');
    this.removeAllListeners();
  }
}

function toBytes(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}
