// The speech models `deskbot models fetch <name>` can install: official sherpa-onnx release archives
// (github.com/k2-fsa/sherpa-onnx/releases, tags asr-models and tts-models). Each unpacks to one folder;
// `files` are the paths that must exist in it afterwards (a trailing "/" would mark a directory).
// URLs, folder and file names follow the sherpa-onnx documentation (k2-fsa.github.io/sherpa/onnx).

export type ModelKind = 'asr' | 'tts';
/** Which sherpa-onnx model family the folder holds (selects the recogniser/synthesiser config). */
export type ModelEngine = 'sense_voice' | 'whisper' | 'vits' | 'kokoro';

export interface ModelEntry {
  name: string;
  kind: ModelKind;
  engine: ModelEngine;
  description: string;
  /** The official .tar.bz2 release archive. */
  url: string;
  /** The top-level folder the archive unpacks to. */
  folder: string;
  /** Paths relative to the folder that must exist after unpacking; "dir/" for a directory. */
  files: string[];
}

/** What sherpa-onnx checks in an espeak-ng-data folder before it loads a voice. */
export const ESPEAK_DATA_FILES = ['phontab', 'phonindex', 'phondata', 'intonations'].map(
  (f) => `espeak-ng-data/${f}`,
);

const RELEASES = 'https://github.com/k2-fsa/sherpa-onnx/releases/download';

const ENTRIES: ModelEntry[] = [
  {
    name: 'sensevoice-small',
    kind: 'asr',
    engine: 'sense_voice',
    description:
      'SenseVoice-Small int8 (2024-07-17): English, Chinese, Japanese, Korean, Cantonese; fast, punctuated (229 MB model)',
    url: `${RELEASES}/asr-models/sherpa-onnx-sense-voice-zh-en-ja-ko-yue-int8-2024-07-17.tar.bz2`,
    folder: 'sherpa-onnx-sense-voice-zh-en-ja-ko-yue-int8-2024-07-17',
    files: ['model.int8.onnx', 'tokens.txt'],
  },
  {
    name: 'whisper-tiny',
    kind: 'asr',
    engine: 'whisper',
    description: 'OpenAI Whisper tiny, multilingual (int8 and float32 encoder/decoder)',
    url: `${RELEASES}/asr-models/sherpa-onnx-whisper-tiny.tar.bz2`,
    folder: 'sherpa-onnx-whisper-tiny',
    files: ['tiny-encoder.int8.onnx', 'tiny-decoder.int8.onnx', 'tiny-tokens.txt'],
  },
  {
    name: 'piper-en-amy',
    kind: 'tts',
    engine: 'vits',
    description: 'Piper (VITS) voice en_US amy, low quality tier: small and fast, 16 kHz',
    url: `${RELEASES}/tts-models/vits-piper-en_US-amy-low.tar.bz2`,
    folder: 'vits-piper-en_US-amy-low',
    files: ['en_US-amy-low.onnx', 'tokens.txt', ...ESPEAK_DATA_FILES],
  },
  {
    name: 'kokoro-en',
    kind: 'tts',
    engine: 'kokoro',
    description:
      'Kokoro-82M v0.19, English, 11 speakers (sid 0-10): natural but heavier (330 MB model), 24 kHz',
    url: `${RELEASES}/tts-models/kokoro-en-v0_19.tar.bz2`,
    folder: 'kokoro-en-v0_19',
    files: ['model.onnx', 'voices.bin', 'tokens.txt', ...ESPEAK_DATA_FILES],
  },
];

export const MODEL_CATALOG: ReadonlyMap<string, ModelEntry> = new Map(ENTRIES.map((e) => [e.name, e]));

export function modelNames(): string[] {
  return [...MODEL_CATALOG.keys()];
}

export function findModel(name: string): ModelEntry | undefined {
  return MODEL_CATALOG.get(name);
}

/** The catalogue entry that installs a model for this engine (the suggestion in "model missing" errors). */
export function defaultModelFor(engine: ModelEngine): ModelEntry {
  const entry = ENTRIES.find((e) => e.engine === engine);
  if (!entry) throw new Error(`no catalogue model for engine ${engine}`);
  return entry;
}

/** The command that installs a catalogue model. */
export function fetchCommand(name: string): string {
  return `npx deskbot models fetch ${name}`;
}
