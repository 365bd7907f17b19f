import { join } from 'node:path';
import { fetchCommand } from '../../models/catalog.js';
import { importSherpa, listEntries, missingModelError, tokenTableProblem } from '../native/sherpa-common.js';
import type { AsrProvider } from './types.js';

export type SherpaAsrKind = 'sense_voice' | 'whisper';

export interface SherpaAsrOptions {
  /** Folder holding the model files (e.g. <data_dir>/models/sensevoice-small). */
  modelDir: string;
  kind: SherpaAsrKind;
  /** onnxruntime intra-op threads per decode. */
  numThreads: number;
  /** '' lets the model detect it; SenseVoice: auto|zh|en|ja|ko|yue; Whisper: en, de, ... */
  language?: string;
}

// Minimal typings for the parts of sherpa-onnx-node used here (the package ships JSDoc only).
export interface OfflineStream {
  acceptWaveform(wave: { samples: Float32Array; sampleRate: number }): void;
}
export interface OfflineRecognizerResult {
  text: string;
  lang?: string;
}
export interface OfflineRecognizer {
  createStream(): OfflineStream;
  decodeAsync(stream: OfflineStream): Promise<OfflineRecognizerResult>;
}
export interface OfflineRecognizerConfig {
  featConfig: { sampleRate: number; featureDim: number };
  modelConfig: {
    senseVoice?: { model: string; language: string; useInverseTextNormalization: number };
    whisper?: { encoder: string; decoder: string; language: string; task: string; tailPaddings: number };
    tokens: string;
    numThreads: number;
    provider: string;
    debug: number;
  };
}
export interface SherpaAsrModule {
  OfflineRecognizer: { createAsync(config: OfflineRecognizerConfig): Promise<OfflineRecognizer> };
}

/** The model files found in a folder, or the names of the missing ones. */
export type SherpaAsrFiles =
  | { ok: true; label: string; config: OfflineRecognizerConfig['modelConfig'] }
  | { ok: false; missing: string[] };

const CATALOG_NAME: Record<SherpaAsrKind, string> = {
  sense_voice: 'sensevoice-small',
  whisper: 'whisper-tiny',
};
const LABEL: Record<SherpaAsrKind, string> = { sense_voice: 'SenseVoice', whisper: 'Whisper' };

export class SherpaAsr implements AsrProvider {
  readonly name = 'sherpa';
  private readonly config: OfflineRecognizerConfig;
  private readonly label: string;
  private loading: Promise<OfflineRecognizer> | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  /** `importModule` replaces the package import (tests). */
  constructor(
    private readonly options: SherpaAsrOptions,
    private readonly importModule: () => Promise<SherpaAsrModule> = () =>
      importSherpa<SherpaAsrModule>(
        'ASR',
        (m) => typeof m.OfflineRecognizer?.createAsync === 'function',
        'OfflineRecognizer.createAsync',
      ),
  ) {
    const found = findAsrModel(options.modelDir, options.kind, options.language ?? '');
    if (!found.ok) {
      const kind = options.kind;
      throw missingModelError(
        'ASR',
        `${LABEL[kind]} model`,
        CATALOG_NAME[kind],
        options.modelDir,
        found.missing,
      );
    }
    const problem = tokenTableProblem(found.config.tokens);
    if (problem) {
      throw new Error(
        `sherpa ASR: ${problem}; the model in ${options.modelDir} is damaged. ` +
          `Reinstall it with: ${fetchCommand(CATALOG_NAME[options.kind])}`,
      );
    }
    this.label = found.label;
    this.config = {
      featConfig: { sampleRate: 16_000, featureDim: 80 },
      modelConfig: { ...found.config, numThreads: options.numThreads },
    };
  }

  describe(): string {
    return `sherpa-onnx ${LABEL[this.options.kind]} (${this.label} in ${this.options.modelDir}, ${this.options.numThreads} threads)`;
  }

  /** Loads the package and the model (seconds for a large model). Call at startup to fail fast. */
  async ready(): Promise<void> {
    await this.load();
  }

  async transcribe(pcm16k: Int16Array, signal: AbortSignal): Promise<string> {
    if (pcm16k.length < 1600) return ''; // under 100 ms: nothing to recognise
    const recognizer = await this.load();
    const samples = new Float32Array(pcm16k.length);
    for (let i = 0; i < pcm16k.length; i++) samples[i] = pcm16k[i]! / 32768;
    const run = this.queue.then(async () => {
      if (signal.aborted) return '';
      const stream = recognizer.createStream();
      stream.acceptWaveform({ samples, sampleRate: 16_000 });
      const result = await recognizer.decodeAsync(stream);
      return result.text ?? '';
    });
    this.queue = run.catch(() => undefined);
    return (await run).trim();
  }

  private load(): Promise<OfflineRecognizer> {
    this.loading ??= (async () => {
      const sherpa = await this.importModule();
      return sherpa.OfflineRecognizer.createAsync(this.config);
    })().catch((error: unknown) => {
      this.loading = undefined; // let a later call retry (e.g. after the files were replaced)
      throw new Error(
        `sherpa ASR could not load the ${LABEL[this.options.kind]} model in ${this.options.modelDir}: ${(error as Error).message}`,
        { cause: error },
      );
    });
    return this.loading;
  }
}

/** Finds the model files for `kind` in `dir` (int8 preferred over float32). */
export function findAsrModel(dir: string, kind: SherpaAsrKind, language = ''): SherpaAsrFiles {
  const files = listEntries(dir).files;
  const has = (name: string) => files.has(name);
  const common = { numThreads: 1, provider: 'cpu', debug: 0 };
  if (kind === 'sense_voice') {
    const model = ['model.int8.onnx', 'model.onnx'].find(has);
    const missing = [
      ...(model ? [] : ['model.int8.onnx (or model.onnx)']),
      ...(has('tokens.txt') ? [] : ['tokens.txt']),
    ];
    if (!model || missing.length > 0) return { ok: false, missing };
    return {
      ok: true,
      label: model,
      config: {
        senseVoice: { model: join(dir, model), language, useInverseTextNormalization: 1 },
        tokens: join(dir, 'tokens.txt'),
        ...common,
      },
    };
  }
  // Whisper archives name files <size>-encoder[.int8].onnx, <size>-decoder[.int8].onnx, <size>-tokens.txt
  // (tiny, tiny.en, base, ...).
  for (const quant of ['.int8', '']) {
    const suffix = `-encoder${quant}.onnx`;
    const encoder = [...files].sort().find((f) => f.endsWith(suffix));
    if (!encoder) continue;
    const prefix = encoder.slice(0, -suffix.length);
    const decoder = `${prefix}-decoder${quant}.onnx`;
    const tokens = `${prefix}-tokens.txt`;
    const missing = [decoder, tokens].filter((f) => !has(f));
    if (missing.length > 0) return { ok: false, missing };
    return {
      ok: true,
      label: `${encoder} + ${decoder}`,
      config: {
        whisper: {
          encoder: join(dir, encoder),
          decoder: join(dir, decoder),
          language,
          task: 'transcribe',
          tailPaddings: -1,
        },
        tokens: join(dir, tokens),
        ...common,
      },
    };
  }
  return {
    ok: false,
    missing: [
      'tiny-encoder.int8.onnx (or tiny-encoder.onnx)',
      'tiny-decoder.int8.onnx (or tiny-decoder.onnx)',
      ...(has('tiny-tokens.txt') ? [] : ['tiny-tokens.txt']),
    ],
  };
}
