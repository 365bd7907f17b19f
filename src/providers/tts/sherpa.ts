// Neural speech with sherpa-onnx (npm `sherpa-onnx-node`) and a downloaded Piper (VITS) or Kokoro voice.
// The package is optional, so it is imported lazily; the model files are checked in the constructor, so
// a missing voice stops startup with the command that installs it.
//
// Threading: `tts.generate()` is synchronous (it would block the event loop for the whole sentence), so
// this provider uses `OfflineTts.createAsync` and `tts.generateAsync({ onProgress })`: synthesis runs on
// a libuv worker thread and audio comes back per sentence through a thread-safe callback. Jobs are
// serialised process-wide: the phonemiser inside sherpa-onnx (espeak-ng) is one global engine.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ESPEAK_DATA_FILES, fetchCommand } from '../../models/catalog.js';
import { AsyncQueue } from '../../util/async-queue.js';
import { importSherpa, listEntries, missingModelError, tokenTableProblem } from '../native/sherpa-common.js';
import type { TtsProvider } from './types.js';

export type SherpaTtsKind = 'vits' | 'kokoro';

export interface SherpaTtsOptions {
  /** Folder holding the voice (e.g. <data_dir>/models/piper-en-amy). */
  modelDir: string;
  /** 'auto' (default): Kokoro when voices.bin is present, else Piper/VITS. */
  kind?: SherpaTtsKind | 'auto';
  /** Speaker id for multi-speaker models (Kokoro en v0.19: 0-10). */
  speakerId?: number;
  /** 1 = normal; larger is faster. */
  speed?: number;
  numThreads?: number;
}

// Minimal typings for the parts of sherpa-onnx-node used here (the package ships JSDoc only).
export interface GeneratedAudio {
  samples: Float32Array;
  sampleRate: number;
}
export interface OfflineTts {
  readonly sampleRate: number;
  readonly numSpeakers: number;
  generateAsync(request: {
    text: string;
    sid: number;
    speed: number;
    /** Called per generated chunk (sentence batch); return 0/false to ask the engine to stop. */
    onProgress?: (info: { samples: Float32Array; progress: number }) => number | boolean;
  }): Promise<GeneratedAudio>;
}
export interface OfflineTtsConfig {
  model: {
    vits?: { model: string; tokens: string; dataDir?: string; lexicon?: string };
    kokoro?: { model: string; voices: string; tokens: string; dataDir: string };
    numThreads: number;
    provider: string;
    debug: boolean;
  };
  /** Sentences per chunk: 1 gives the first audio soonest. */
  maxNumSentences: number;
}
export interface SherpaTtsModule {
  OfflineTts: { createAsync(config: OfflineTtsConfig): Promise<OfflineTts> };
}

export type SherpaTtsFiles =
  | { ok: true; kind: SherpaTtsKind; label: string; sampleRateHint: number; model: OfflineTtsConfig['model'] }
  | { ok: false; kind: SherpaTtsKind; missing: string[] };

const CATALOG_NAME: Record<SherpaTtsKind, string> = { vits: 'piper-en-amy', kokoro: 'kokoro-en' };
const LABEL: Record<SherpaTtsKind, string> = { vits: 'Piper/VITS', kokoro: 'Kokoro' };

/** One synthesis at a time in the process (see the header). */
let jobs: Promise<unknown> = Promise.resolve();

export class SherpaTts implements TtsProvider {
  readonly name = 'sherpa';
  private readonly config: OfflineTtsConfig;
  private readonly found: Extract<SherpaTtsFiles, { ok: true }>;
  private engine: OfflineTts | undefined;
  private loading: Promise<OfflineTts> | undefined;

  /** `importModule` replaces the package import (tests). */
  constructor(
    private readonly options: SherpaTtsOptions,
    private readonly importModule: () => Promise<SherpaTtsModule> = () =>
      importSherpa<SherpaTtsModule>(
        'TTS',
        (m) => typeof m.OfflineTts?.createAsync === 'function',
        'OfflineTts.createAsync',
      ),
  ) {
    const found = findTtsModel(options.modelDir, options.kind ?? 'auto');
    if (!found.ok)
      throw missingModelError(
        'TTS',
        `${LABEL[found.kind]} voice`,
        CATALOG_NAME[found.kind],
        options.modelDir,
        found.missing,
        found.kind === 'vits' ? ` (or ${fetchCommand(CATALOG_NAME.kokoro)} for Kokoro)` : '',
      );
    const tokens = found.model.kokoro?.tokens ?? found.model.vits?.tokens ?? '';
    const problem = tokenTableProblem(tokens);
    if (problem) {
      throw new Error(
        `sherpa TTS: ${problem}; the voice in ${options.modelDir} is damaged. ` +
          `Reinstall it with: ${fetchCommand(CATALOG_NAME[found.kind])}`,
      );
    }
    this.found = found;
    this.config = {
      model: { ...found.model, numThreads: options.numThreads ?? 2 },
      maxNumSentences: 1,
    };
  }

  /**
   * The loaded model's rate. Before the model has loaded (it loads on first use or `ready()`), the rate
   * the folder declares: Kokoro 24 kHz, Piper from <voice>.onnx.json, else 22.05 kHz. Chunks are only
   * yielded after loading, so a consumer that reads this per chunk always sees the real rate.
   */
  get sampleRate(): number {
    return this.engine?.sampleRate ?? this.found.sampleRateHint;
  }

  describe(): string {
    return `sherpa-onnx ${LABEL[this.found.kind]} (${this.found.label} in ${this.options.modelDir}, speaker ${this.options.speakerId ?? 0}, ${this.sampleRate} Hz)`;
  }

  /** Loads the package and the voice. Call at startup to fail fast and avoid a slow first reply. */
  async ready(): Promise<void> {
    await this.load();
  }

  synthesize(text: string, signal: AbortSignal): AsyncIterable<Int16Array> {
    const queue = new AsyncQueue<Int16Array>();
    if (!text.trim() || signal.aborted) {
      queue.end();
      return queue;
    }
    const onAbort = () => queue.end(); // the consumer stops at once; the engine is asked to stop below
    signal.addEventListener('abort', onAbort, { once: true });
    const job = jobs.then(async () => {
      if (signal.aborted) return;
      const tts = await this.load();
      if (signal.aborted) return;
      let streamed = 0;
      let finished = false;
      const audio = await tts.generateAsync({
        text,
        sid: this.options.speakerId ?? 0,
        speed: this.options.speed ?? 1,
        onProgress: ({ samples }) => {
          if (signal.aborted) return 0;
          if (!finished && samples.length > 0) {
            queue.push(toInt16(samples));
            streamed += samples.length;
          }
          return 1;
        },
      });
      // Callbacks are delivered through a queue that may still hold some when the promise settles:
      // ignore late ones and send whatever the callbacks had not delivered, so no audio is lost or doubled.
      finished = true;
      if (!signal.aborted && audio.samples.length > streamed)
        queue.push(toInt16(audio.samples.subarray(streamed)));
    });
    jobs = job.catch(() => undefined);
    job.then(
      () => queue.end(),
      (error) => queue.fail(error),
    );
    job.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => undefined);
    return queue;
  }

  private load(): Promise<OfflineTts> {
    this.loading ??= (async () => {
      const sherpa = await this.importModule();
      const engine = await sherpa.OfflineTts.createAsync(this.config);
      this.engine = engine;
      return engine;
    })().catch((error: unknown) => {
      this.loading = undefined;
      throw new Error(
        `sherpa TTS could not load the ${LABEL[this.found.kind]} voice in ${this.options.modelDir}: ${(error as Error).message}`,
        { cause: error },
      );
    });
    return this.loading;
  }
}

/** Finds a Piper/VITS or Kokoro voice in `dir`. */
export function findTtsModel(dir: string, kind: SherpaTtsKind | 'auto' = 'auto'): SherpaTtsFiles {
  const entries = listEntries(dir);
  const has = (name: string) => entries.files.has(name);
  const hasDir = (name: string) => entries.dirs.has(name);
  const resolved: SherpaTtsKind = kind === 'auto' ? (has('voices.bin') ? 'kokoro' : 'vits') : kind;
  // sherpa-onnx refuses an espeak-ng-data folder without these files; name them up front.
  const espeakMissing = hasDir('espeak-ng-data')
    ? ESPEAK_DATA_FILES.filter((f) => !isFile(join(dir, f)))
    : ['espeak-ng-data/'];

  if (resolved === 'kokoro') {
    const missing = [...['model.onnx', 'voices.bin', 'tokens.txt'].filter((f) => !has(f)), ...espeakMissing];
    if (missing.length > 0) return { ok: false, kind: resolved, missing };
    return {
      ok: true,
      kind: resolved,
      label: 'model.onnx',
      sampleRateHint: 24_000,
      model: {
        kokoro: {
          model: join(dir, 'model.onnx'),
          voices: join(dir, 'voices.bin'),
          tokens: join(dir, 'tokens.txt'),
          dataDir: join(dir, 'espeak-ng-data'),
        },
        numThreads: 2,
        provider: 'cpu',
        debug: false,
      },
    };
  }

  // Piper voices are <lang>_<REGION>-<name>-<quality>.onnx with tokens.txt and espeak-ng-data/;
  // other VITS models use model.onnx (or similar) with lexicon.txt instead of espeak-ng-data.
  const onnx = [...entries.files].filter((f) => f.endsWith('.onnx')).sort();
  const model = onnx.includes('model.onnx') ? 'model.onnx' : onnx[0];
  const phonemes =
    hasDir('espeak-ng-data') || !has('lexicon.txt') ? ('espeak' as const) : ('lexicon' as const);
  const missing = [
    ...(model ? [] : ['a voice .onnx file (e.g. en_US-amy-low.onnx)']),
    ...(has('tokens.txt') ? [] : ['tokens.txt']),
    ...(phonemes === 'espeak' ? espeakMissing : []),
  ];
  if (!model || missing.length > 0) return { ok: false, kind: resolved, missing };
  return {
    ok: true,
    kind: resolved,
    label: model,
    sampleRateHint: piperSampleRate(join(dir, `${model}.json`)) ?? 22_050,
    model: {
      vits: {
        model: join(dir, model),
        tokens: join(dir, 'tokens.txt'),
        ...(phonemes === 'espeak'
          ? { dataDir: join(dir, 'espeak-ng-data') }
          : { lexicon: join(dir, 'lexicon.txt') }),
      },
      numThreads: 2,
      provider: 'cpu',
      debug: false,
    },
  };
}

function piperSampleRate(jsonPath: string): number | undefined {
  try {
    const rate = (JSON.parse(readFileSync(jsonPath, 'utf8')) as { audio?: { sample_rate?: unknown } }).audio
      ?.sample_rate;
    return typeof rate === 'number' && rate > 0 ? rate : undefined;
  } catch {
    return undefined;
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function toInt16(samples: Float32Array): Int16Array {
  const pcm = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i]!;
    pcm[i] = s >= 1 ? 32767 : s <= -1 ? -32768 : Math.round(s * 32767);
  }
  return pcm;
}
