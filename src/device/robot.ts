// The virtual robot: a firmware emulator that boots through OTA, opens the audio channel, speaks
// the device protocol (hello, listen, audio, MCP as a server) and decodes the speech it receives.
// Tests and `deskbot robot` script it; it behaves as the real firmware does where the server can tell.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import WebSocket from 'ws';
import { concatPcm, OpusFrameEncoder } from '../audio/opus.js';
import type { Clock } from '../audio/pacer.js';
import { loadResampler, resample } from '../audio/resample.js';
import { decodeWav, encodeWav } from '../audio/wav.js';
import {
  type BinaryVersion,
  decodeBinary,
  encodeBinary,
  isBinaryVersion,
  type ListenMode,
  type OtaResponse,
  parseServerFrame,
  type ServerFrame,
} from '../protocol/index.js';
import {
  activate,
  type BootOptions,
  bootloaderSelect,
  checkVersion,
  installFirmware,
  runningVersion,
  wantsUpgrade,
} from './boot.js';
import { DEFAULT_SCENE, explainPhoto, renderJpeg, type Scene } from './camera.js';
import { Firmware } from './firmware.js';
import { DeviceMcpServer } from './mcp-server.js';
import { freshState, loadPersisted, type Persisted, savePersisted } from './persisted.js';
import { Speaker } from './speaker.js';
import { buildTools, type DeviceModel, initialModel } from './tools.js';
import { loopPcm, quietHum, speechPcm16k } from './voice.js';

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
  disconnected: [number];
}

const MAX_FRAME_LOG = 5000;

export class VirtualRobot extends EventEmitter<RobotEvents> {
  readonly deviceId: string;
  readonly model: DeviceModel = initialModel();
  readonly frames: ReceivedFrame[] = [];
  readonly stats = {
    audioPackets: 0,
    audioDroppedNotSpeaking: 0,
    badPackets: 0,
    boots: 0,
    rollbacks: 0,
    eventsDropped: 0,
  };
  /** The firmware behaviour: state machine, LED ring, perception events. */
  readonly firmware: Firmware;
  ota: OtaResponse | undefined;
  sessionId: string | undefined;
  downlinkSampleRate = 24_000;
  vision: { url?: string; token?: string } = {};
  /** Speaking state, decoder and the reply being heard. */
  readonly speaker = new Speaker();
  /** What the camera sees. */
  scene: Scene = { ...DEFAULT_SCENE };
  /** What the microphone hears when nobody talks (16 kHz): a quiet hum unless a scenario sets something. */
  ambient: Int16Array = quietHum();
  private persisted: Persisted;
  private socket: WebSocket | undefined;
  private binaryVersion: BinaryVersion;
  private readonly mcp: DeviceMcpServer;
  private readonly log: (message: string, fields?: Record<string, unknown>) => void;

  constructor(private readonly options: VirtualRobotOptions) {
    super();
    this.log = options.log ?? (() => undefined);
    this.deviceId = (options.deviceId ?? randomMac()).toLowerCase();
    this.binaryVersion = options.protocolVersion ?? 1;
    this.persisted = this.loadState();
    if (this.persisted.toggles) Object.assign(this.model.toggles, this.persisted.toggles);
    this.mcp = new DeviceMcpServer({
      pageBytes: options.mcpPageBytes ?? 8000,
      serverInfo: { name: this.boardType, version: this.firmwareVersion },
      onInitialize: (params) => {
        const vision = (params.capabilities as { vision?: { url?: string; token?: string } } | undefined)
          ?.vision;
        if (vision) this.vision = { ...vision };
      },
    });
    this.firmware = new Firmware({
      model: this.model,
      // The firmware only has the audio channel during a conversation; events outside it are dropped.
      emit: (name, data) => {
        if (this.connected) this.sendEvent(name, data);
        else this.stats.eventsDropped++;
      },
      openListening: () => {
        if (this.connected) this.listen('start', 'auto');
      },
      captureAudio: (ms) => {
        if (this.connected)
          void this.sendPcm(loopPcm(this.ambient, (16_000 * ms) / 1000), { paced: false }).catch(
            () => undefined,
          );
      },
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.faceLostGraceMs !== undefined ? { faceLostGraceMs: options.faceLostGraceMs } : {}),
    });
    this.firmware.start();
    const tools = buildTools(this.model, {
      setState: (state) => this.firmware.setState(state),
      // The face pip compares against the firmware's clock, so the tool stamps with the same one.
      now: () => this.firmware.now(),
      changed: (what) => {
        if (what === 'led') this.firmware.ledWritten();
        if (what === 'toggle') void this.saveState();
      },
      takePhoto: (question) =>
        explainPhoto(
          { ...this.vision, deviceId: this.deviceId, clientId: this.persisted.clientId },
          question,
          renderJpeg(this.scene),
        ),
      reboot: () => void this.reboot(),
      deviceStatus: () => ({ firmware: this.firmwareVersion, partition: this.persisted.flash.running }),
    });
    for (const tool of tools) this.mcp.add(tool);
  }

  get boardType(): string {
    return this.options.boardType ?? 'deskbot-virtual';
  }

  get firmwareVersion(): string {
    return runningVersion(this.persisted.flash);
  }

  get partition(): string {
    return this.persisted.flash.running;
  }

  get clientId(): string {
    return this.persisted.clientId;
  }

  get protocolVersion(): BinaryVersion {
    return this.binaryVersion;
  }

  get connected(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** Boot as the firmware does: check version (installing and rebooting into updates), activate, ready to connect. */
  async boot(signal?: AbortSignal): Promise<OtaResponse> {
    const options = this.bootOptions(signal);
    await this.saveState();
    for (let round = 0; round < 4; round++) {
      this.stats.boots++;
      const response = await checkVersion(options);
      this.ota = response;
      if (wantsUpgrade(this.persisted.flash, response.firmware) && round < 3) {
        const previous = this.persisted.flash.running;
        if ((await installFirmware(options, response.firmware!)) === 'installed') {
          this.emit('rebooting');
          const { rolledBack } = bootloaderSelect(this.persisted.flash, previous);
          if (rolledBack) {
            this.stats.rollbacks++;
            this.log('new image failed its check; rolled back', { partition: previous });
          }
          await this.saveState();
          continue;
        }
      }
      if (response.activation) await activate(options, response.activation);
      const version = response.websocket?.version;
      if (isBinaryVersion(version)) this.binaryVersion = version;
      return response;
    }
    throw new Error('boot did not settle after 3 firmware updates');
  }

  /** Opens the audio channel: WebSocket with the firmware's headers, then hello; fails after 10 s without one. */
  async connect(): Promise<void> {
    const url = this.ota?.websocket?.url;
    if (!url) throw new Error('no websocket url: boot first');
    const headers: Record<string, string> = {
      'Protocol-Version': String(this.binaryVersion),
      'Device-Id': this.deviceId,
      'Client-Id': this.persisted.clientId,
    };
    const token = this.ota?.websocket?.token;
    if (token) headers.Authorization = token.includes(' ') ? token : `Bearer ${token}`;
    const socket = new WebSocket(url, { headers, perMessageDeflate: false });
    this.socket = socket;
    socket.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    socket.on('close', (code) => {
      if (this.socket === socket) this.socket = undefined;
      this.speaker.speaking = false;
      this.emit('disconnected', code);
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
      socket.once('unexpected-response', (_req, res) =>
        reject(new Error(`upgrade refused: HTTP ${res.statusCode}`)),
      );
    });
    socket.on('error', (error) => this.log('socket error', { error: error.message }));
    const hello = this.waitFor((frame) => frame.type === 'hello', this.options.helloTimeoutMs ?? 10_000);
    this.sendJson({
      type: 'hello',
      version: this.binaryVersion,
      features: { mcp: true, aec: false },
      transport: 'websocket',
      audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
    });
    try {
      const frame = await hello;
      if (frame.type === 'hello') {
        this.sessionId = frame.session_id;
        this.downlinkSampleRate = frame.audio_params.sample_rate ?? 24_000;
        this.speaker.configure(this.downlinkSampleRate);
      }
    } catch (error) {
      socket.terminate();
      throw new Error(`channel failed: ${(error as Error).message}`);
    }
  }

  /** Boot then connect, the usual start. */
  async start(signal?: AbortSignal): Promise<void> {
    await this.boot(signal);
    await this.connect();
  }

  disconnect(): void {
    this.socket?.close(1000, 'bye');
  }

  /** Drops the TCP connection without a Close frame, as the device does when it loses Wi-Fi. */
  dropConnection(): void {
    this.socket?.terminate();
  }

  async reboot(): Promise<void> {
    this.emit('rebooting');
    this.socket?.terminate();
    await this.start();
  }

  sendJson(frame: Record<string, unknown>): void {
    if (!this.connected) throw new Error('not connected');
    this.socket!.send(JSON.stringify(frame));
  }

  /** Raw send, for fuzzing: bytes or text exactly as given. */
  sendRaw(data: string | Uint8Array, binary: boolean): void {
    if (!this.connected) throw new Error('not connected');
    this.socket!.send(data, { binary });
  }

  sendAudioPacket(opus: Uint8Array, timestampMs = 0): void {
    this.sendRaw(encodeBinary(this.binaryVersion, opus, { timestampMs }), true);
  }

  listen(state: 'start' | 'stop' | 'detect', mode: ListenMode = 'auto', text?: string): void {
    if (state === 'start') this.firmware.setListening(true);
    if (state === 'stop') this.firmware.setListening(false);
    this.sendJson({ session_id: this.sessionId, type: 'listen', state, mode, ...(text ? { text } : {}) });
  }

  abort(reason?: string): void {
    this.sendJson({ session_id: this.sessionId, type: 'abort', ...(reason ? { reason } : {}) });
  }

  sendEvent(name: string, data: Record<string, unknown> = {}): void {
    this.sendJson({ session_id: this.sessionId, type: 'event', name, data });
  }

  /** Streams 16 kHz PCM as 60 ms Opus packets, paced in real time unless `paced` is false. */
  async sendPcm(pcm16k: Int16Array, options: { paced?: boolean; frameMs?: 20 | 60 } = {}): Promise<void> {
    const encoder = new OpusFrameEncoder(16000, options.frameMs ?? 60);
    const packets = [...encoder.encode(pcm16k), ...encoder.flush()];
    let timestampMs = 0;
    const start = performance.now();
    for (const packet of packets) {
      this.sendAudioPacket(packet, timestampMs);
      timestampMs += encoder.frameMs;
      if (options.paced !== false) {
        const wait = start + timestampMs - performance.now();
        if (wait > 0) await delay(wait);
      }
    }
  }

  /**
   * Says `text` into the microphone: espeak-ng speech at 16 kHz followed by `silenceMs` of silence (so the
   * server's VAD sees the end), streamed as Opus. Opens listening first unless `listen` is false.
   */
  async say(
    text: string,
    options: { mode?: ListenMode; paced?: boolean; silenceMs?: number; listen?: boolean } = {},
  ): Promise<void> {
    const pcm = await speechPcm16k(text);
    const silence = new Int16Array((16000 * (options.silenceMs ?? 1000)) / 1000);
    if (options.listen !== false) this.listen('start', options.mode ?? 'auto');
    await this.sendPcm(concatPcm(pcm, silence), { paced: options.paced ?? false });
    if (options.mode === 'manual') this.listen('stop', 'manual');
  }

  /** Sends a 16-bit WAV file (any rate) as microphone input, with listen start and trailing silence. */
  async sendWav(file: Uint8Array, options: { paced?: boolean; mode?: ListenMode } = {}): Promise<void> {
    await loadResampler();
    const wav = decodeWav(file);
    const pcm = resample(wav.pcm, wav.sampleRate, 16000);
    this.listen('start', options.mode ?? 'auto');
    await this.sendPcm(concatPcm(pcm, new Int16Array(16000)), { paced: options.paced ?? false });
  }

  /** Resolves with the next server frame matching `predicate` (looking at frames from now on). */
  waitFor(predicate: (frame: ServerFrame) => boolean, timeoutMs = 10_000): Promise<ServerFrame> {
    return new Promise((resolve, reject) => {
      const onFrame = (frame: ServerFrame) => {
        if (!predicate(frame)) return;
        clearTimeout(timer);
        this.off('frame', onFrame);
        resolve(frame);
      };
      const timer = setTimeout(() => {
        this.off('frame', onFrame);
        reject(new Error(`no matching frame within ${timeoutMs} ms`));
      }, timeoutMs);
      this.on('frame', onFrame);
    });
  }

  async saveReplyWav(path: string, pcm: Int16Array): Promise<void> {
    await writeFile(path, encodeWav(pcm, this.downlinkSampleRate));
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.onBinary(data);
      return;
    }
    const parsed = parseServerFrame(data.toString('utf8'));
    if (parsed.kind !== 'frame') {
      this.stats.badPackets++;
      this.log('unusable server frame', { detail: parsed.kind === 'error' ? parsed.message : parsed.type });
      return;
    }
    const frame = parsed.frame;
    this.frames.push({ at: Date.now(), frame });
    if (this.frames.length > MAX_FRAME_LOG) this.frames.splice(0, this.frames.length - MAX_FRAME_LOG);
    this.onFrame(frame);
    this.emit('frame', frame);
  }

  private onFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case 'tts':
        if (frame.state === 'start') {
          // The firmware enters Speaking and resets its decoder; audio is played only in this state.
          this.speaker.start();
          this.firmware.setSpeaking(true);
        } else if (frame.state === 'sentence_start') {
          this.speaker.sentence(frame.text);
        } else if (frame.state === 'stop') {
          this.firmware.setSpeaking(false);
          this.emit('reply', this.speaker.stop());
        }
        break;
      case 'system':
        if (frame.command === 'reboot')
          void this.reboot().catch((e) => this.log('reboot failed', { error: String(e) }));
        break;
      case 'mcp':
        void this.answerMcp(frame.payload);
        break;
      default:
        break;
    }
  }

  private async answerMcp(payload: Record<string, unknown>): Promise<void> {
    const reply = await this.mcp.handle(payload);
    if (reply && this.connected) this.sendJson({ session_id: this.sessionId, type: 'mcp', payload: reply });
  }

  private onBinary(data: Buffer): void {
    let payload: Uint8Array;
    try {
      const packet = decodeBinary(
        this.binaryVersion,
        new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      );
      if (packet.payloadType !== 0) return;
      payload = packet.payload;
    } catch {
      this.stats.badPackets++;
      return;
    }
    const result = this.speaker.play(payload);
    if ('played' in result) {
      this.stats.audioPackets++;
      this.emit('audio', result.played);
    } else if (result.dropped === 'not_speaking') {
      this.stats.audioDroppedNotSpeaking++;
    } else {
      this.stats.audioPackets++;
      this.stats.badPackets++;
    }
  }

  private bootOptions(signal?: AbortSignal): BootOptions {
    return {
      otaUrl: this.options.otaUrl,
      identity: {
        deviceId: this.deviceId,
        clientId: this.persisted.clientId,
        boardType: this.boardType,
        appName: 'xiaozhi',
        language: 'en-US',
        ...(this.options.serialNumber ? { serialNumber: this.options.serialNumber } : {}),
        ...(this.options.hmacKey ? { hmacKey: this.options.hmacKey } : {}),
      },
      flash: this.persisted.flash,
      retryBaseMs: this.options.retryBaseMs ?? 10_000,
      maxAttempts: this.options.maxBootAttempts ?? 10,
      activationPollMs: Math.min(3000, this.options.retryBaseMs ?? 3000),
      activationAttempts: 10,
      fetchTimeoutMs: 10_000,
      sleep: (ms, s) => delay(ms, undefined, s ? { signal: s } : {}),
      log: this.log,
      ...(signal ? { signal } : {}),
    };
  }

  private loadState(): Persisted {
    const fresh = freshState(this.options.clientId ?? randomUUID(), this.options.firmwareVersion ?? '1.0.0');
    return loadPersisted(this.options.stateDir, this.deviceId, fresh);
  }

  private async saveState(): Promise<void> {
    this.persisted.toggles = { ...this.model.toggles };
    await savePersisted(this.options.stateDir, this.deviceId, this.persisted);
  }
}

export function randomMac(): string {
  const bytes = Array.from({ length: 6 }, () => Math.floor(Math.random() * 256));
  bytes[0] = (bytes[0]! & 0xfe) | 0x02; // locally administered, unicast
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}
