// Replays what real xiaozhi clients send (test/fixtures/clients/<client>/, recorded from their source; see the
// README there) against a running voice server: their OTA request, their upgrade headers or query string, their
// hello, their MCP answers and their frame sequences, with real speech (espeak-ng) encoded by our Opus codec at
// the client's own frame duration, sample rate and binary framing. Everything the server sends back is kept,
// and downlink audio is decoded as the client would.

import { EventEmitter } from 'node:events';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { OpusFrameEncoder, OpusPacketDecoder, type OpusRate } from '../../src/audio/opus.js';
import { resample } from '../../src/audio/resample.js';
import type { VirtualRobot } from '../../src/device/robot.js';
import { speechPcm16k } from '../../src/device/voice.js';
import {
  type BinaryVersion,
  decodeBinary,
  encodeBinary,
  parseServerFrame,
  type ServerFrame,
} from '../../src/protocol/index.js';
import { PACKAGE_ROOT } from '../../src/version.js';
import { Timeline } from './timeline.js';

export const CLIENTS_DIR = join(PACKAGE_ROOT, 'test', 'fixtures', 'clients');

type Json = Record<string, unknown>;

/** One thing a client sends: a text frame, audio (speech or silence, as Opus frames) or a raw binary frame. */
export type Step =
  | { send: Json }
  | { audio: 'wake_word' | 'question' | 'silence'; ms?: number }
  /** Hex of the binary frame's bytes; '' is the empty frame the browser page sends when recording stops. */
  | { binary: string };

export interface ClientFixture {
  name: string;
  profile: {
    client: string;
    mac: string;
    clientId: string;
    binaryVersion: BinaryVersion;
    frameMs: number;
    uplinkSampleRate: OpusRate;
    /** WebSocket ping interval of the client; null = it never pings. */
    pingIntervalMs: number | null;
    wakeWord: string | null;
    listenMode: string;
  };
  ota: { requests: Array<{ label: string; method: string; headers: Record<string, string>; body: Json }> };
  upgrade: { headers: Record<string, string>; query: Record<string, string> };
  hello: Json;
  mcp: {
    envelope: Json;
    answersInitialize: boolean;
    honoursWithUserTools: boolean;
    initialize: Json;
    tools: Array<{ name: string }>;
    userOnlyTools: Array<{ name: string }>;
    unknownToolError: Json;
  };
  /** wake, question, afterReply (what it sends when a reply ends) and client-specific ones. */
  sequences: Record<string, Step[]>;
}

const readJson = (dir: string, file: string) => JSON.parse(readFileSync(join(dir, file), 'utf8'));

/** The recorded clients: every folder under test/fixtures/clients/ with a profile.json. */
export function clientNames(): string[] {
  return readdirSync(CLIENTS_DIR)
    .filter((name) => statSync(join(CLIENTS_DIR, name)).isDirectory())
    .filter((name) => readdirSync(join(CLIENTS_DIR, name)).includes('profile.json'))
    .sort();
}

export function loadClient(name: string): ClientFixture {
  const dir = join(CLIENTS_DIR, name);
  return {
    name,
    profile: readJson(dir, 'profile.json'),
    ota: readJson(dir, 'ota.json'),
    upgrade: readJson(dir, 'upgrade.json'),
    hello: readJson(dir, 'hello.json'),
    mcp: readJson(dir, 'mcp.json'),
    sequences: readJson(dir, 'sequences.json'),
  };
}

/** Replaces {{name}} in every string of `value` (deeply) with vars[name]. */
export function fill<T>(value: T, vars: Record<string, string>): T {
  if (typeof value === 'string')
    return value.replace(/\{\{(\w+)\}\}/g, (whole, key: string) => vars[key] ?? whole) as T;
  if (Array.isArray(value)) return value.map((item) => fill(item, vars)) as T;
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, vars)])) as T;
  return value;
}

const identity = (fixture: ClientFixture) => ({
  mac: fixture.profile.mac,
  client_id: fixture.profile.clientId,
});

/** Sends one of the client's recorded boot requests to the OTA URL exactly as recorded. */
export async function postOta(
  otaUrl: string,
  fixture: ClientFixture,
  index = 0,
): Promise<{ status: number; json: any; headers: Headers }> {
  const recorded = fill(fixture.ota.requests[index]!, identity(fixture));
  const response = await fetch(otaUrl, {
    method: recorded.method,
    headers: recorded.headers,
    body: JSON.stringify(recorded.body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: response.status, json, headers: response.headers };
}

let speechCache: Map<string, Int16Array> | undefined;
/** espeak-ng speech at 16 kHz, made once per text. */
export async function speech16k(text: string): Promise<Int16Array> {
  speechCache ??= new Map();
  const cached = speechCache.get(text);
  if (cached) return cached;
  const pcm = await speechPcm16k(text);
  speechCache.set(text, pcm);
  return pcm;
}

/** PCM of exactly `ms` (cut, or padded with silence). */
function fitMs(pcm: Int16Array, ms: number): Int16Array {
  const out = new Int16Array((16_000 * ms) / 1000);
  out.set(pcm.subarray(0, out.length));
  return out;
}

export interface ReplayEvents {
  frame: [ServerFrame];
  audio: [Int16Array];
}

/** What the client says aloud during a replay. */
export interface Speech {
  /** The spoken question (audio step "question"). */
  question?: string;
  /** What the wake-word pre-roll audio says. */
  wakeWord?: string;
  /** Replaces {{text}} in text steps (typed questions). */
  text?: string;
}

/** One connected client replaying its recording. */
export class ReplayClient extends EventEmitter<ReplayEvents> {
  /** Frames and decoded audio in arrival order (MCP frames excluded), for order assertions. */
  readonly timeline: Timeline;
  readonly frames: ServerFrame[] = [];
  /** Server frames our own frame schema refuses (a client would choke on them too). */
  readonly badFrames: string[] = [];
  /** Binary packets that do not decode as Opus, or are longer than the announced frame duration. */
  readonly badAudio: string[] = [];
  readonly mcpRequests: Array<{ method: string; params: Json }> = [];
  serverHello: Extract<ServerFrame, { type: 'hello' }> | undefined;
  pongs = 0;
  closedWith: number | undefined;
  private readonly decoder = new OpusPacketDecoder(24_000);
  private uplinkMs = 0;

  private constructor(
    readonly fixture: ClientFixture,
    private readonly socket: WebSocket,
  ) {
    super();
    // Timeline reads only the 'frame' and 'audio' events a VirtualRobot emits; this client emits the same two.
    this.timeline = new Timeline(this as unknown as VirtualRobot);
    socket.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    socket.on('pong', () => this.pongs++);
    socket.on('close', (code) => {
      this.closedWith = code;
    });
  }

  /**
   * Opens the WebSocket as the client does (its headers or its query string on the URL from the OTA reply),
   * sends its hello and waits for the server's (10 s, the firmware's deadline).
   */
  static async connect(websocketUrl: string, fixture: ClientFixture): Promise<ReplayClient> {
    const upgrade = fill(fixture.upgrade, identity(fixture));
    const url = new URL(websocketUrl);
    for (const [key, value] of Object.entries(upgrade.query)) url.searchParams.append(key, value);
    const socket = new WebSocket(url, { headers: upgrade.headers, perMessageDeflate: false });
    const client = new ReplayClient(fixture, socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
      socket.once('unexpected-response', (_request, response) =>
        reject(new Error(`upgrade refused: HTTP ${response.statusCode}`)),
      );
    });
    const hello = client.waitFor((frame) => frame.type === 'hello', 10_000);
    socket.send(JSON.stringify(fill(fixture.hello, identity(fixture))));
    client.serverHello = (await hello) as Extract<ServerFrame, { type: 'hello' }>;
    return client;
  }

  get open(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }

  get sessionId(): string {
    return this.serverHello?.session_id ?? '';
  }

  ping(): void {
    this.socket.ping();
  }

  close(): void {
    this.socket.terminate();
  }

  /** Sends the named recorded sequence (with {{session_id}}, {{mac}}, {{client_id}}, {{text}} filled in). */
  async play(sequence: string, speech: Speech = {}): Promise<void> {
    const steps = this.fixture.sequences[sequence];
    if (!steps) throw new Error(`${this.fixture.name} has no "${sequence}" sequence`);
    const vars = { ...identity(this.fixture), session_id: this.sessionId, text: speech.text ?? '' };
    for (const step of steps) {
      if ('send' in step) this.socket.send(JSON.stringify(fill(step.send, vars)));
      else if ('binary' in step) this.socket.send(Buffer.from(step.binary, 'hex'), { binary: true });
      else if (step.audio === 'silence')
        await this.sendPcm(new Int16Array((16_000 * (step.ms ?? 1000)) / 1000));
      else {
        const text = step.audio === 'question' ? speech.question : speech.wakeWord;
        if (!text) throw new Error(`${sequence}: no text given for ${step.audio} audio`);
        const pcm = await speech16k(text);
        await this.sendPcm(step.ms === undefined ? pcm : fitMs(pcm, step.ms));
      }
    }
  }

  /** Resolves with the next frame (from now on) that matches. */
  waitFor(predicate: (frame: ServerFrame) => boolean, timeoutMs: number): Promise<ServerFrame> {
    return new Promise((resolve, reject) => {
      const onFrame = (frame: ServerFrame) => {
        if (!predicate(frame)) return;
        clearTimeout(timer);
        this.off('frame', onFrame);
        resolve(frame);
      };
      const timer = setTimeout(() => {
        this.off('frame', onFrame);
        reject(new Error(`${this.fixture.name}: no matching frame within ${timeoutMs} ms`));
      }, timeoutMs);
      this.on('frame', onFrame);
    });
  }

  /** 16 kHz PCM → the client's rate → Opus frames of its duration → its binary framing (unpaced). */
  private async sendPcm(pcm16k: Int16Array): Promise<void> {
    const { uplinkSampleRate: rate, frameMs, binaryVersion } = this.fixture.profile;
    const pcm = rate === 16_000 ? pcm16k : resample(pcm16k, 16_000, rate);
    const encoder = new OpusFrameEncoder(rate, frameMs);
    for (const packet of [...encoder.encode(pcm), ...encoder.flush()]) {
      this.socket.send(encodeBinary(binaryVersion, packet, { timestampMs: this.uplinkMs }), { binary: true });
      this.uplinkMs += frameMs;
    }
    await new Promise((resolve) => setImmediate(resolve));
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.onAudio(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      return;
    }
    const parsed = parseServerFrame(data.toString('utf8'));
    if (parsed.kind !== 'frame') {
      this.badFrames.push(data.toString('utf8'));
      return;
    }
    const frame = parsed.frame;
    this.frames.push(frame);
    if (frame.type === 'mcp') this.answerMcp(frame.payload as Json);
    this.emit('frame', frame);
  }

  private onAudio(bytes: Uint8Array): void {
    const maxSamples = (24_000 * (this.serverHello?.audio_params.frame_duration ?? 60)) / 1000;
    try {
      const packet = decodeBinary(this.fixture.profile.binaryVersion, bytes);
      const pcm = this.decoder.decode(packet.payload);
      if (!pcm) this.badAudio.push(`undecodable packet of ${packet.payload.length} bytes`);
      else if (pcm.length > maxSamples) this.badAudio.push(`packet of ${pcm.length} samples > ${maxSamples}`);
      else this.emit('audio', pcm);
    } catch (error) {
      this.badAudio.push(`framing: ${(error as Error).message}`);
    }
  }

  /** Answers the server's MCP requests the way this client does (its results, its error shape). */
  private answerMcp(payload: Json): void {
    const method = payload.method;
    if (typeof method !== 'string' || payload.id === undefined) return;
    const params = (payload.params ?? {}) as Json;
    this.mcpRequests.push({ method, params });
    const { mcp } = this.fixture;
    let body: Json;
    if (method === 'initialize') {
      if (!mcp.answersInitialize) return;
      body = { result: mcp.initialize };
    } else if (method === 'tools/list') {
      const withUser = !mcp.honoursWithUserTools || params.withUserTools === true;
      body = { result: { tools: [...mcp.tools, ...(withUser ? mcp.userOnlyTools : [])] } };
    } else {
      const tool = String((params as { name?: unknown }).name ?? method);
      body = { error: fill(mcp.unknownToolError, { tool }) };
    }
    const envelope = fill(mcp.envelope, { session_id: this.sessionId });
    this.socket.send(JSON.stringify({ ...envelope, payload: { jsonrpc: '2.0', id: payload.id, ...body } }));
  }
}

/** How many samples of downlink audio a timeline holds. */
export function heardSamples(timeline: Timeline): number {
  return timeline.entries.reduce((n, e) => n + (e.kind === 'audio' ? e.samples : 0), 0);
}
