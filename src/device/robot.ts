// The virtual robot: a firmware emulator that boots through OTA, opens the audio channel, speaks
// the device protocol (hello, listen, audio, MCP as a server) and decodes the speech it receives.
// Tests and `deskbot robot` script it; it behaves as the real firmware does where the server can tell.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { writeFile } from 'node:fs/promises';
import WebSocket from 'ws';
import { encodeWav } from '../audio/wav.js';
import {
  type BinaryVersion,
  encodeBinary,
  isBinaryVersion,
  type ListenMode,
  type OtaResponse,
  parseServerFrame,
  type ServerFrame,
} from '../protocol/index.js';
import { type BootOptions, bootSequence, firmwareBootOptions, runningVersion } from './boot.js';
import { DEFAULT_SCENE, explainPhoto, renderJpeg, type Scene } from './camera.js';
import { ChannelError, nextFrame, openSocket } from './channel.js';
import { Firmware } from './firmware.js';
import { randomMac } from './identity.js';
import { DeviceMcpServer } from './mcp-server.js';
import { type PcmSendOptions, spokenPcm, streamPcm, wavPcm } from './microphone.js';
import { freshState, loadPersisted, type Persisted, savePersisted } from './persisted.js';
import type { ReceivedFrame, RobotEvents, VirtualRobotOptions } from './robot-types.js';
import { Speaker } from './speaker.js';
import { buildTools, type DeviceModel, initialModel } from './tools.js';
import { loopPcm, quietHum } from './voice.js';

export type { ReceivedFrame, RobotEvents, VirtualRobotOptions } from './robot-types.js';

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
  /** A connect or reboot is under way: whoever reconnects must not open a second channel. */
  private openingChannels = 0;
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
        this.emit('perception', name, data);
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

  /** A connect or reboot is in progress. */
  get opening(): boolean {
    return this.openingChannels > 0;
  }

  /** Boot as the firmware does: check version (installing and rebooting into updates), activate, ready to connect. */
  async boot(signal?: AbortSignal): Promise<OtaResponse> {
    await this.saveState();
    const response = await bootSequence(this.bootOptions(signal), {
      booting: () => this.stats.boots++,
      rebooting: () => this.emit('rebooting'),
      rolledBack: (previous) => {
        this.stats.rollbacks++;
        this.log('new image failed its check; rolled back', { partition: previous });
      },
      save: () => this.saveState(),
    });
    this.ota = response;
    const version = response.websocket?.version;
    if (isBinaryVersion(version)) this.binaryVersion = version;
    return response;
  }

  /** Opens the audio channel: WebSocket with the firmware's headers, then hello; fails after 10 s without one. */
  async connect(): Promise<void> {
    const url = this.ota?.websocket?.url;
    if (!url) throw new ChannelError('no websocket url: boot first');
    await this.whileOpening(() => this.openChannel(url));
  }

  private async whileOpening(work: () => Promise<void>): Promise<void> {
    this.openingChannels++;
    try {
      await work();
    } finally {
      this.openingChannels--;
    }
  }

  private async openChannel(url: string): Promise<void> {
    const socket = await openSocket(url, {
      protocolVersion: this.binaryVersion,
      deviceId: this.deviceId,
      clientId: this.persisted.clientId,
      ...(this.ota?.websocket?.token ? { token: this.ota.websocket.token } : {}),
    });
    this.socket = socket;
    socket.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    socket.on('close', (code) => {
      if (this.socket === socket) this.socket = undefined;
      this.goIdle();
      this.emit('disconnected', code);
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
      await hello; // onFrame took its session id and audio parameters
    } catch (error) {
      socket.terminate();
      throw new ChannelError(`channel failed: ${(error as Error).message}`);
    }
  }

  /** The firmware on a closed channel (OnAudioChannelClosed): back to idle, mic closed, nothing playing. */
  private goIdle(): void {
    if (this.speaker.speaking) {
      this.speaker.stop();
      this.firmware.setSpeaking(false);
    }
    this.firmware.setListening(false);
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
    await this.whileOpening(async () => {
      this.socket?.terminate();
      await this.start();
    });
  }

  sendJson(frame: Record<string, unknown>): void {
    if (!this.connected) throw new ChannelError('not connected');
    this.socket!.send(JSON.stringify(frame));
  }

  /** Raw send, for fuzzing: bytes or text exactly as given. */
  sendRaw(data: string | Uint8Array, binary: boolean): void {
    if (!this.connected) throw new ChannelError('not connected');
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
  async sendPcm(pcm16k: Int16Array, options: PcmSendOptions = {}): Promise<void> {
    await streamPcm(pcm16k, (opus, timestampMs) => this.sendAudioPacket(opus, timestampMs), options);
  }

  /**
   * Says `text` into the microphone: espeak-ng speech at 16 kHz followed by `silenceMs` of silence (so the
   * server's VAD sees the end), streamed as Opus. Opens listening first unless `listen` is false.
   */
  async say(
    text: string,
    options: { mode?: ListenMode; paced?: boolean; silenceMs?: number; listen?: boolean } = {},
  ): Promise<void> {
    const pcm = await spokenPcm(text, options.silenceMs ?? 1000);
    if (options.listen !== false) this.listen('start', options.mode ?? 'auto');
    await this.sendPcm(pcm, { paced: options.paced ?? false });
    if (options.mode === 'manual') this.listen('stop', 'manual');
  }

  /** Sends a 16-bit WAV file (any rate) as microphone input, with listen start and trailing silence. */
  async sendWav(file: Uint8Array, options: { paced?: boolean; mode?: ListenMode } = {}): Promise<void> {
    const pcm = await wavPcm(file);
    this.listen('start', options.mode ?? 'auto');
    await this.sendPcm(pcm, { paced: options.paced ?? false });
  }

  /** Resolves with the next server frame matching `predicate` (looking at frames from now on). */
  waitFor(predicate: (frame: ServerFrame) => boolean, timeoutMs = 10_000): Promise<ServerFrame> {
    const subscribe = (listener: (frame: ServerFrame) => void) => {
      this.on('frame', listener);
      return () => this.off('frame', listener);
    };
    return nextFrame(subscribe, predicate, timeoutMs);
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
      case 'hello':
        // Taken here, not where connect() awaits it: the server's MCP initialize can arrive in the same read.
        this.sessionId = frame.session_id;
        this.downlinkSampleRate = frame.audio_params.sample_rate ?? 24_000;
        this.speaker.configure(this.downlinkSampleRate);
        this.emit('connected', frame.session_id);
        break;
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
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const result = this.speaker.receive(this.binaryVersion, bytes);
    if ('played' in result) {
      this.stats.audioPackets++;
      this.emit('audio', result.played);
    } else if (result.dropped === 'not_speaking') {
      this.stats.audioDroppedNotSpeaking++;
    } else if (result.dropped !== 'not_audio') {
      if (result.dropped === 'undecodable') this.stats.audioPackets++;
      this.stats.badPackets++;
    }
  }

  private bootOptions(signal?: AbortSignal): BootOptions {
    const { otaUrl, serialNumber, hmacKey, retryBaseMs, maxBootAttempts } = this.options;
    return firmwareBootOptions({
      otaUrl,
      identity: {
        deviceId: this.deviceId,
        clientId: this.persisted.clientId,
        boardType: this.boardType,
        ...(serialNumber ? { serialNumber } : {}),
        ...(hmacKey ? { hmacKey } : {}),
      },
      flash: this.persisted.flash,
      ...(retryBaseMs !== undefined ? { retryBaseMs } : {}),
      ...(maxBootAttempts !== undefined ? { maxAttempts: maxBootAttempts } : {}),
      log: this.log,
      ...(signal ? { signal } : {}),
    });
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
