// Messages between the bench (parent, the robots) and the voice server it runs in a child process.
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchLatencies } from './providers.js';

/** Server-side figures of one finished turn, in ms (the child's own performance.now() clock). */
export interface TurnFigures {
  deviceId: string;
  aborted: boolean;
  /** utteranceEndAt → firstAudioAt. */
  totalMs?: number;
  asrMs?: number;
  /** replyStartAt → modelFirstTokenAt. */
  modelMs?: number;
  ttsFirstChunkMs?: number;
  /** utteranceEndAt + asrMs → replyStartAt (turn machine, stt frame). */
  asrToReplyMs?: number;
  /** modelFirstTokenAt + ttsFirstChunkMs → firstAudioAt (segmenter, emotion, Opus encode, pacer). */
  ttsToAudioMs?: number;
}

export interface ServerSample {
  at: number;
  cpu: NodeJS.CpuUsage;
  memory: NodeJS.MemoryUsage;
  sessions: number;
  attached: number;
  /** Summed over live conversations and sessions. */
  droppedAudio: number;
  droppedAudioOut: number;
  utterances: number;
  replies: number;
  /** Event-loop delay since the previous sample, ms. */
  loopDelay: { p50: number; p99: number; max: number };
}

/** The server at rest, after forced GCs: what must stay flat while devices come and go. */
export interface ResourceSample {
  memory: NodeJS.MemoryUsage;
  /** process.getActiveResourcesInfo(), counted by type (TCPSocketWrap, Timeout, …). */
  handles: Record<string, number>;
  /** Open file descriptors (/proc/self/fd), -1 where there is no /proc. */
  fds: number;
  registry: number;
  /** Sessions not yet closed, and conversations still attached to one. */
  sessions: number;
  attached: number;
  /** Created but not yet garbage-collected, after the forced GCs (FinalizationRegistry). */
  liveSessions: number;
  liveConversations: number;
  sessionsCreated: number;
}

export type ChildRequest =
  | { id: number; cmd: 'sample'; gc?: boolean }
  | { id: number; cmd: 'resources' }
  | { id: number; cmd: 'turns' }
  | { id: number; cmd: 'exit' };

type RequestBody = { cmd: 'sample'; gc?: boolean } | { cmd: 'resources' } | { cmd: 'turns' };

export type ChildMessage =
  | { type: 'ready'; wsPort: number; httpPort: number }
  | { type: 'reply'; id: number; result: unknown }
  | { type: 'error'; message: string };

/** The parent's handle on the server child. */
export class ServerChild {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (result: unknown) => void; reject: (e: Error) => void }
  >();

  private constructor(
    private readonly child: ChildProcess,
    readonly wsPort: number,
    readonly httpPort: number,
  ) {
    child.on('message', (message: ChildMessage) => {
      if (message.type !== 'reply') return;
      this.pending.get(message.id)?.resolve(message.result);
      this.pending.delete(message.id);
    });
    // A server that dies under load (out of memory, a crash) must fail the bench, not hang it.
    child.once('exit', (code, signal) => {
      for (const { reject } of this.pending.values())
        reject(new Error(`server child exited (${signal ?? code}) with a request pending`));
      this.pending.clear();
    });
  }

  static start(latencies: BenchLatencies): Promise<ServerChild> {
    const entry = fileURLToPath(new URL('./server-child.js', import.meta.url));
    const child = fork(entry, [JSON.stringify(latencies)], {
      // BENCH_CHILD_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the server under load.
      execArgv: ['--expose-gc', ...(process.env.BENCH_CHILD_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`server child exited (${code}) before ready`));
      child.once('exit', onExit);
      child.on('message', (message: ChildMessage) => {
        if (message.type === 'error') reject(new Error(`server child: ${message.message}`));
        if (message.type !== 'ready') return;
        child.off('exit', onExit);
        resolve(new ServerChild(child, message.wsPort, message.httpPort));
      });
    });
  }

  get otaUrl(): string {
    return `http://127.0.0.1:${this.httpPort}/device/ota/`;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  sample(gc = false): Promise<ServerSample> {
    return this.request({ cmd: 'sample', gc }) as Promise<ServerSample>;
  }

  resources(): Promise<ResourceSample> {
    return this.request({ cmd: 'resources' }) as Promise<ResourceSample>;
  }

  /** Finished turns since the last call. */
  turns(): Promise<TurnFigures[]> {
    return this.request({ cmd: 'turns' }) as Promise<TurnFigures[]>;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ id: 0, cmd: 'exit' } satisfies ChildRequest);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  private request(body: RequestBody): Promise<unknown> {
    const id = this.nextId++;
    if (this.child.exitCode !== null || this.child.signalCode !== null)
      return Promise.reject(new Error('server child has exited'));
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, ...body } as ChildRequest);
    });
  }
}
