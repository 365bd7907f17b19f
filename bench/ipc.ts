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

export type ChildRequest =
  | { id: number; cmd: 'sample'; gc?: boolean }
  | { id: number; cmd: 'turns' }
  | { id: number; cmd: 'exit' };

export type ChildMessage =
  | { type: 'ready'; wsPort: number; httpPort: number }
  | { type: 'reply'; id: number; result: unknown }
  | { type: 'error'; message: string };

/** The parent's handle on the server child. */
export class ServerChild {
  private nextId = 1;
  private readonly pending = new Map<number, (result: unknown) => void>();

  private constructor(
    private readonly child: ChildProcess,
    readonly wsPort: number,
    readonly httpPort: number,
  ) {
    child.on('message', (message: ChildMessage) => {
      if (message.type !== 'reply') return;
      this.pending.get(message.id)?.(message.result);
      this.pending.delete(message.id);
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

  /** Finished turns since the last call. */
  turns(): Promise<TurnFigures[]> {
    return this.request({ cmd: 'turns' }) as Promise<TurnFigures[]>;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ id: 0, cmd: 'exit' } satisfies ChildRequest);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  private request(body: { cmd: 'sample'; gc?: boolean } | { cmd: 'turns' }): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.child.send({ id, ...body } as ChildRequest);
    });
  }
}
