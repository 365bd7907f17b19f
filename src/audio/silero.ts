// Silero VAD v5 on onnxruntime-node, with the model file shipped in @ricky0123/vad-web.
// v5 takes 512 new samples at 16 kHz plus the last 64 samples of the previous window as context
// (measured here: without the context the probabilities are smeared across word gaps).
//
// Every device's windows go through one shared batcher: the windows that arrive within one event-loop turn
// run as a single batch (the model takes a batch dimension: input [B, 576], state [2, B, 128]). Measured
// here: 133 µs of CPU per window alone, 39 µs in batches of 8, 35 µs from 32 up — onnxruntime's per-call
// overhead dominates a single 32 ms window, and `run` blocks the event loop while it works.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import type { VadModel } from './utterance.js';

const WINDOW = 512;
const CONTEXT = 64;
const INPUT = CONTEXT + WINDOW;
/** One stream's recurrent state: the two [128] halves of the model's [2, B, 128] state. */
const STATE = 2 * 128;
/** Larger batches gain nothing more (35 µs per window from 32 up) and would hold the loop longer. */
const MAX_BATCH = 64;

type Ort = typeof import('onnxruntime-node');

let shared: Promise<{ ort: Ort; session: InferenceSession }> | undefined;
let sharedBatcher: Promise<SileroBatcher> | undefined;

export function sileroModelPath(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('@ricky0123/vad-web/package.json')), 'dist', 'silero_vad_v5.onnx');
}

/** Loads the model once per process; every device gets its own state on top of the shared session. */
export function loadSilero(modelPath = sileroModelPath()): Promise<{ ort: Ort; session: InferenceSession }> {
  shared ??= (async () => {
    const ort = (await import('onnxruntime-node')).default as unknown as Ort;
    const session = await ort.InferenceSession.create(modelPath, {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
    });
    return { ort, session };
  })();
  return shared;
}

interface Pending {
  /** [context | window], INPUT samples. */
  input: Float32Array;
  /** The stream's state in; replaced by the state out. */
  state: Float32Array;
  resolve: (probability: number) => void;
  reject: (error: unknown) => void;
}

/** Runs the windows of many streams together. Each stream keeps its own state; results are per stream. */
export class SileroBatcher {
  private queue: Pending[] = [];
  private scheduled = false;
  readonly stats = { runs: 0, windows: 0, largestBatch: 0 };

  constructor(
    private readonly ort: Ort,
    private readonly session: InferenceSession,
    private readonly maxBatch = MAX_BATCH,
  ) {}

  /** The probability of speech in `input`; `state` is read and then overwritten with the next state. */
  run(input: Float32Array, state: Float32Array): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ input, state, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        // setImmediate, not a microtask: audio of other devices read in the same poll phase joins this batch.
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      await this.runBatch(batch);
    }
  }

  private async runBatch(batch: Pending[]): Promise<void> {
    const size = batch.length;
    const input = new Float32Array(size * INPUT);
    const state = new Float32Array(size * STATE);
    batch.forEach((item, b) => {
      input.set(item.input, b * INPUT);
      state.set(item.state.subarray(0, 128), b * 128);
      state.set(item.state.subarray(128), (size + b) * 128);
    });
    try {
      const result = await this.session.run({
        input: new this.ort.Tensor('float32', input, [size, INPUT]),
        state: new this.ort.Tensor('float32', state, [2, size, 128]),
        sr: new this.ort.Tensor('int64', BigInt64Array.from([16000n])),
      });
      const output = (result.output as Tensor).data as Float32Array;
      const next = (result.stateN as Tensor).data as Float32Array;
      this.stats.runs++;
      this.stats.windows += size;
      this.stats.largestBatch = Math.max(this.stats.largestBatch, size);
      batch.forEach((item, b) => {
        item.state.set(next.subarray(b * 128, (b + 1) * 128), 0);
        item.state.set(next.subarray((size + b) * 128, (size + b + 1) * 128), 128);
        item.resolve(output[b]!);
      });
    } catch (error) {
      for (const item of batch) item.reject(error);
    }
  }
}

/** The process's batcher, on the shared session. */
export function sileroBatcher(modelPath?: string): Promise<SileroBatcher> {
  sharedBatcher ??= loadSilero(modelPath).then(({ ort, session }) => new SileroBatcher(ort, session));
  return sharedBatcher;
}

export class SileroVad implements VadModel {
  readonly windowSamples = WINDOW;
  private readonly state = new Float32Array(STATE);
  private readonly input = new Float32Array(INPUT);

  private constructor(private readonly batcher: SileroBatcher) {}

  static async create(modelPath?: string): Promise<SileroVad> {
    return new SileroVad(await sileroBatcher(modelPath));
  }

  async probability(window: Float32Array): Promise<number> {
    this.input.set(window.subarray(0, WINDOW), CONTEXT);
    const probability = await this.batcher.run(this.input.slice(), this.state);
    // The last 64 samples of this window are the next window's context.
    this.input.copyWithin(0, WINDOW, WINDOW + CONTEXT);
    return probability;
  }

  reset(): void {
    this.state.fill(0);
    this.input.fill(0);
  }
}
