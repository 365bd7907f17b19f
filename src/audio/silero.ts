// Silero VAD v5 on onnxruntime-node, with the model file shipped in @ricky0123/vad-web.
// v5 takes 512 new samples at 16 kHz plus the last 64 samples of the previous window as context
// (measured here: without the context the probabilities are smeared across word gaps).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import type { VadModel } from './utterance.js';

const WINDOW = 512;
const CONTEXT = 64;

type Ort = typeof import('onnxruntime-node');

let shared: Promise<{ ort: Ort; session: InferenceSession }> | undefined;

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

export class SileroVad implements VadModel {
  readonly windowSamples = WINDOW;
  private state: Tensor;
  private readonly input = new Float32Array(CONTEXT + WINDOW);
  private readonly sr: Tensor;

  private constructor(
    private readonly ort: Ort,
    private readonly session: InferenceSession,
  ) {
    this.state = this.zeroState();
    this.sr = new ort.Tensor('int64', BigInt64Array.from([16000n]));
  }

  static async create(modelPath?: string): Promise<SileroVad> {
    const { ort, session } = await loadSilero(modelPath);
    return new SileroVad(ort, session);
  }

  async probability(window: Float32Array): Promise<number> {
    this.input.set(window.subarray(0, WINDOW), CONTEXT);
    const feeds = {
      input: new this.ort.Tensor('float32', this.input.slice(), [1, CONTEXT + WINDOW]),
      state: this.state,
      sr: this.sr,
    };
    const result = await this.session.run(feeds);
    this.state = result.stateN as Tensor;
    // The last 64 samples of this window are the next window's context.
    this.input.copyWithin(0, WINDOW, WINDOW + CONTEXT);
    return (result.output as Tensor).data[0] as number;
  }

  reset(): void {
    this.state = this.zeroState();
    this.input.fill(0);
  }

  private zeroState(): Tensor {
    return new this.ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
  }
}
