// sherpa-onnx providers and `deskbot models fetch`, offline: missing-model errors name the fetch command
// and the files; fetchModel installs a real .tar.bz2 (built here with tar -cjf) served by a fake fetch,
// and reports unknown names, HTTP errors, no network and incomplete archives without leaving a folder.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findModel, MODEL_CATALOG, type ModelEntry } from '../../src/models/catalog.js';
import { fetchModel, isModelInstalled, listModels, modelDir } from '../../src/models/fetch.js';
import {
  type OfflineRecognizerConfig,
  SherpaAsr,
  type SherpaAsrModule,
} from '../../src/providers/asr/sherpa.js';
import {
  type OfflineTts,
  type OfflineTtsConfig,
  SherpaTts,
  type SherpaTtsModule,
} from '../../src/providers/tts/sherpa.js';

let root: string;
let n = 0;
function fresh(label: string): string {
  const dir = join(root, `${label}-${n++}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const TOKENS = '<unk> 0\n<s> 1\n</s> 2\n';

/** A folder holding `files` as small dummy files (token tables are well-formed; "dir/" makes a folder). */
function fakeModelFolder(parent: string, folder: string, files: string[]): string {
  const dir = join(parent, folder);
  mkdirSync(dir, { recursive: true });
  for (const file of files) {
    const path = join(dir, file);
    if (file.endsWith('/')) {
      mkdirSync(path, { recursive: true });
      continue;
    }
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, file.endsWith('tokens.txt') ? TOKENS : `dummy ${file}\n`);
  }
  return dir;
}

/** A .tar.bz2 whose top-level folder is entry.folder with `files` inside. */
function buildArchive(entry: ModelEntry, files: string[]): Buffer {
  const staging = fresh('staging');
  fakeModelFolder(staging, entry.folder, files);
  const archive = join(staging, 'model.tar.bz2');
  execFileSync('tar', ['-cjf', archive, '-C', staging, entry.folder]);
  return readFileSync(archive);
}

interface Call {
  url: string;
  init: RequestInit | undefined;
}
function serving(body: Buffer, calls: Call[] = []): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    calls.push({ url: String(input), init });
    return new Response(new Uint8Array(body), {
      status: 200,
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(body.length) },
    });
  }) as typeof fetch;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}
function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected an error');
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'deskbot-sherpa-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('catalogue', () => {
  it('lists the four models with official sherpa-onnx release archives', () => {
    expect(listModels().map((m) => m.name)).toEqual([
      'sensevoice-small',
      'whisper-tiny',
      'piper-en-amy',
      'kokoro-en',
    ]);
    for (const entry of MODEL_CATALOG.values()) {
      expect(entry.url).toMatch(
        /^https:\/\/github\.com\/k2-fsa\/sherpa-onnx\/releases\/download\/(asr|tts)-models\//,
      );
      expect(entry.url.endsWith(`/${entry.folder}.tar.bz2`)).toBe(true);
      expect(entry.url).toContain(`/${entry.kind}-models/`);
      expect(entry.files.length).toBeGreaterThan(0);
    }
  });

  it('places a model at <dataDir>/models/<name>', () => {
    expect(modelDir('whisper-tiny', '/srv/deskbot/data')).toBe('/srv/deskbot/data/models/whisper-tiny');
  });
});

describe('providers with a missing model', () => {
  it('SherpaAsr (SenseVoice) names the files and the fetch command', () => {
    const error = thrown(
      () => new SherpaAsr({ modelDir: join(root, 'nowhere'), kind: 'sense_voice', numThreads: 1 }),
    );
    expect(error.message).toContain('npx deskbot models fetch sensevoice-small');
    expect(error.message).toContain('model.int8.onnx');
    expect(error.message).toContain('tokens.txt');
    expect(error.message).toContain('does not exist');
  });

  it('SherpaAsr (Whisper) on an empty folder names the tiny files and the fetch command', () => {
    const error = thrown(() => new SherpaAsr({ modelDir: fresh('empty'), kind: 'whisper', numThreads: 1 }));
    expect(error.message).toContain('npx deskbot models fetch whisper-tiny');
    for (const file of ['tiny-encoder.int8.onnx', 'tiny-decoder.int8.onnx', 'tiny-tokens.txt']) {
      expect(error.message).toContain(file);
    }
  });

  it('SherpaAsr (SenseVoice) with only the model names just tokens.txt', () => {
    const dir = fakeModelFolder(fresh('partial'), 'sv', ['model.onnx']);
    const error = thrown(() => new SherpaAsr({ modelDir: dir, kind: 'sense_voice', numThreads: 1 }));
    expect(error.message).toMatch(/missing tokens\.txt\./);
  });

  it('SherpaTts (Piper) on an empty folder names the files and the fetch command', () => {
    const error = thrown(() => new SherpaTts({ modelDir: fresh('empty') }));
    expect(error.message).toContain('npx deskbot models fetch piper-en-amy');
    expect(error.message).toContain('tokens.txt');
    expect(error.message).toContain('espeak-ng-data/');
    expect(error.message).toContain('.onnx');
  });

  it('SherpaTts (Piper) with an empty espeak-ng-data/ names the data files sherpa-onnx needs', () => {
    const dir = fakeModelFolder(fresh('partial'), 'piper', ['voice.onnx', 'tokens.txt', 'espeak-ng-data/']);
    const error = thrown(() => new SherpaTts({ modelDir: dir }));
    expect(error.message).toContain('espeak-ng-data/phontab, espeak-ng-data/phonindex');
    expect(error.message).not.toContain('tokens.txt');
  });

  it('a damaged token table is refused up front (sherpa-onnx would end the process)', () => {
    const entry = findModel('sensevoice-small')!;
    const dir = fakeModelFolder(fresh('damaged'), entry.folder, entry.files);
    writeFileSync(join(dir, 'tokens.txt'), '<unk> 0\n<html>rate limited</html>\n');
    const error = thrown(() => new SherpaAsr({ modelDir: dir, kind: 'sense_voice', numThreads: 1 }));
    expect(error.message).toContain('line 2');
    expect(error.message).toContain('npx deskbot models fetch sensevoice-small');

    const piper = findModel('piper-en-amy')!;
    const voice = fakeModelFolder(fresh('damaged'), piper.folder, piper.files);
    writeFileSync(join(voice, 'tokens.txt'), 'truncated');
    expect(thrown(() => new SherpaTts({ modelDir: voice })).message).toContain('piper-en-amy');
  });

  it('SherpaTts (Kokoro) with only model.onnx names the other files', () => {
    const dir = fakeModelFolder(fresh('partial'), 'kokoro', ['model.onnx']);
    const error = thrown(() => new SherpaTts({ modelDir: dir, kind: 'kokoro' }));
    expect(error.message).toContain('npx deskbot models fetch kokoro-en');
    expect(error.message).toContain('voices.bin, tokens.txt, espeak-ng-data/');
    expect(error.message).not.toContain('model.onnx,');
  });
});

describe('providers with the files present (nothing is loaded until first use)', () => {
  it('SherpaAsr picks the int8 files of each catalogue layout', () => {
    for (const name of ['sensevoice-small', 'whisper-tiny']) {
      const entry = findModel(name)!;
      const dir = fakeModelFolder(fresh('ok'), entry.folder, entry.files);
      const kind = entry.engine === 'whisper' ? 'whisper' : 'sense_voice';
      const asr = new SherpaAsr({ modelDir: dir, kind, numThreads: 2 });
      expect(asr.describe()).toContain(entry.files[0]!);
    }
  });

  it('SherpaTts detects Piper and Kokoro and takes the rate from the folder until loaded', () => {
    const piper = findModel('piper-en-amy')!;
    const piperDir = fakeModelFolder(fresh('ok'), piper.folder, piper.files);
    writeFileSync(
      join(piperDir, 'en_US-amy-low.onnx.json'),
      JSON.stringify({ audio: { sample_rate: 16000 } }),
    );
    const vits = new SherpaTts({ modelDir: piperDir });
    expect(vits.sampleRate).toBe(16000);
    expect(vits.describe()).toContain('Piper/VITS (en_US-amy-low.onnx');

    const kokoro = findModel('kokoro-en')!;
    const kokoroDir = fakeModelFolder(fresh('ok'), kokoro.folder, kokoro.files);
    const tts = new SherpaTts({ modelDir: kokoroDir, speakerId: 3 });
    expect(tts.sampleRate).toBe(24000);
    expect(tts.describe()).toContain('Kokoro');
  });

  const sherpaInstalled = (() => {
    try {
      createRequire(import.meta.url).resolve('sherpa-onnx-node');
      return true;
    } catch {
      return false;
    }
  })();

  it.skipIf(!sherpaInstalled)('loading dummy files fails with the engine error, not a crash', async () => {
    const entry = findModel('sensevoice-small')!;
    const dir = fakeModelFolder(fresh('dummy'), entry.folder, entry.files);
    const asr = new SherpaAsr({ modelDir: dir, kind: 'sense_voice', numThreads: 1 });
    const error = await rejection(asr.ready());
    // The config was accepted (paths exist); onnxruntime then rejects the dummy model.
    expect(error.message).toContain('could not load the SenseVoice model');
    expect(error.message).toMatch(/model\.int8\.onnx/);

    const piper = findModel('piper-en-amy')!;
    const tts = new SherpaTts({ modelDir: fakeModelFolder(fresh('dummy'), piper.folder, piper.files) });
    const ttsError = await rejection(tts.ready());
    expect(ttsError.message).toContain('could not load the Piper/VITS voice');
  });
});

describe('providers over a stand-in for the native module', () => {
  const signal = new AbortController().signal;

  it('SherpaAsr passes float samples and the model files to sherpa-onnx and trims the text', async () => {
    const entry = findModel('whisper-tiny')!;
    const dir = fakeModelFolder(fresh('ok'), entry.folder, entry.files);
    const seen: { config?: OfflineRecognizerConfig; samples?: Float32Array; rate?: number } = {};
    let loads = 0;
    const fake: SherpaAsrModule = {
      OfflineRecognizer: {
        createAsync: async (config) => {
          loads++;
          seen.config = config;
          return {
            createStream: () => ({
              acceptWaveform: (wave) => {
                seen.samples = wave.samples;
                seen.rate = wave.sampleRate;
              },
            }),
            decodeAsync: async () => ({ text: ' Hello robot. ' }),
          };
        },
      },
    };
    const asr = new SherpaAsr(
      { modelDir: dir, kind: 'whisper', numThreads: 3, language: 'en' },
      async () => fake,
    );
    const pcm = new Int16Array(3200);
    pcm[0] = 16384;
    pcm[1] = -32768;
    expect(await asr.transcribe(pcm, signal)).toBe('Hello robot.');
    expect(await asr.transcribe(pcm, signal)).toBe('Hello robot.');
    expect(loads).toBe(1);
    expect(seen.rate).toBe(16000);
    expect([seen.samples![0], seen.samples![1], seen.samples!.length]).toEqual([0.5, -1, 3200]);
    expect(seen.config).toMatchObject({
      featConfig: { sampleRate: 16000, featureDim: 80 },
      modelConfig: {
        whisper: {
          encoder: join(dir, 'tiny-encoder.int8.onnx'),
          decoder: join(dir, 'tiny-decoder.int8.onnx'),
          language: 'en',
          task: 'transcribe',
        },
        tokens: join(dir, 'tiny-tokens.txt'),
        numThreads: 3,
      },
    });
    expect(await asr.transcribe(new Int16Array(800), signal)).toBe(''); // too short to decode
  });

  function fakeTts(
    generate: OfflineTts['generateAsync'],
    configs: OfflineTtsConfig[] = [],
  ): () => Promise<SherpaTtsModule> {
    return async () => ({
      OfflineTts: {
        createAsync: async (config) => {
          configs.push(config);
          return { sampleRate: 22050, numSpeakers: 1, generateAsync: generate };
        },
      },
    });
  }
  async function collect(
    stream: AsyncIterable<Int16Array>,
    each?: (chunk: Int16Array) => void,
  ): Promise<Int16Array[]> {
    const chunks: Int16Array[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      each?.(chunk);
    }
    return chunks;
  }

  it('SherpaTts streams chunks as generated, adds what the callbacks missed and ignores late ones', async () => {
    const entry = findModel('piper-en-amy')!;
    const dir = fakeModelFolder(fresh('ok'), entry.folder, entry.files);
    const full = Float32Array.from([0.5, -0.5, 2, -2, 0.25, 0]);
    const configs: OfflineTtsConfig[] = [];
    const tts = new SherpaTts(
      { modelDir: dir, speakerId: 2, speed: 1.2 },
      fakeTts(async ({ text, sid, speed, onProgress }) => {
        expect([text, sid, speed]).toEqual(['Hello there.', 2, 1.2]);
        onProgress!({ samples: full.subarray(0, 2), progress: 0.3 });
        await new Promise((resolve) => setImmediate(resolve));
        onProgress!({ samples: full.subarray(2, 4), progress: 0.6 });
        setImmediate(() => onProgress!({ samples: full.subarray(4), progress: 1 })); // arrives late
        return { samples: full, sampleRate: 22050 };
      }, configs),
    );
    expect(tts.sampleRate).toBe(22050); // no .onnx.json: the default until loaded
    const chunks = await collect(tts.synthesize('Hello there.', signal));
    expect(chunks.map((c) => c.length)).toEqual([2, 2, 2]);
    expect(Array.from(chunks.flatMap((c) => Array.from(c)))).toEqual([16384, -16383, 32767, -32768, 8192, 0]);
    expect(configs[0]).toMatchObject({
      model: { vits: { model: join(dir, 'en_US-amy-low.onnx'), dataDir: join(dir, 'espeak-ng-data') } },
      maxNumSentences: 1,
    });
    expect(await collect(tts.synthesize('   ', signal))).toEqual([]);
  });

  it('SherpaTts stops at abort and asks the engine to stop', async () => {
    const entry = findModel('kokoro-en')!;
    const dir = fakeModelFolder(fresh('ok'), entry.folder, entry.files);
    const answers: Array<number | boolean> = [];
    const controller = new AbortController();
    const tts = new SherpaTts(
      { modelDir: dir },
      fakeTts(async ({ onProgress }) => {
        answers.push(onProgress!({ samples: new Float32Array(10), progress: 0.5 }));
        await new Promise((resolve) => setTimeout(resolve, 20));
        answers.push(onProgress!({ samples: new Float32Array(10), progress: 1 }));
        return { samples: new Float32Array(20), sampleRate: 24000 };
      }),
    );
    const chunks = await collect(tts.synthesize('One. Two.', controller.signal), () => controller.abort());
    expect(chunks).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(answers).toEqual([1, 0]);
  });

  it('SherpaTts runs one synthesis at a time', async () => {
    const entry = findModel('piper-en-amy')!;
    const dir = fakeModelFolder(fresh('ok'), entry.folder, entry.files);
    let active = 0;
    let most = 0;
    const generate: OfflineTts['generateAsync'] = async ({ onProgress }) => {
      most = Math.max(most, ++active);
      await new Promise((resolve) => setTimeout(resolve, 10));
      onProgress!({ samples: new Float32Array(4), progress: 1 });
      active--;
      return { samples: new Float32Array(4), sampleRate: 16000 };
    };
    const a = new SherpaTts({ modelDir: dir }, fakeTts(generate));
    const b = new SherpaTts({ modelDir: dir }, fakeTts(generate));
    const results = await Promise.all([
      collect(a.synthesize('first', signal)),
      collect(b.synthesize('second', signal)),
      collect(a.synthesize('third', signal)),
    ]);
    expect(results.map((r) => r.length)).toEqual([1, 1, 1]);
    expect(most).toBe(1);
  });
});

describe('fetchModel', () => {
  it('rejects an unknown name, listing the known ones', async () => {
    const error = await rejection(
      fetchModel('whisper-huge', fresh('dest'), { fetchImpl: serving(Buffer.alloc(0)) }),
    );
    expect(error.message).toContain('unknown model "whisper-huge"');
    expect(error.message).toContain('sensevoice-small, whisper-tiny, piper-en-amy, kokoro-en');
  });

  it('downloads, unpacks and installs the folder as <destDir>/<name>', async () => {
    const entry = findModel('sensevoice-small')!;
    const archive = buildArchive(entry, [...entry.files, 'README.md']);
    const dataDir = fresh('data');
    const dest = join(dataDir, 'models');
    expect(isModelInstalled('sensevoice-small', dataDir)).toBe(false);
    const calls: Call[] = [];
    const lines: string[] = [];
    const path = await fetchModel('sensevoice-small', dest, {
      fetchImpl: serving(archive, calls),
      log: (line) => lines.push(line),
    });

    expect(path).toBe(join(dest, 'sensevoice-small'));
    expect(path).toBe(modelDir('sensevoice-small', dataDir));
    expect(isModelInstalled('sensevoice-small', dataDir)).toBe(true);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.url).toBe(entry.url);
    expect(calls[0]!.init?.redirect).toBe('follow');
    expect(readFileSync(join(path, 'tokens.txt'), 'utf8')).toBe(TOKENS);
    expect(readdirSync(dest)).toEqual(['sensevoice-small']); // no work folder left behind
    expect(lines.some((l) => l.includes('installed sensevoice-small'))).toBe(true);
    // The provider accepts the installed folder.
    expect(() => new SherpaAsr({ modelDir: path, kind: 'sense_voice', numThreads: 1 })).not.toThrow();

    // A second fetch keeps the complete copy without downloading.
    await fetchModel('sensevoice-small', dest, { fetchImpl: serving(archive, calls) });
    expect(calls).toHaveLength(1);
  });

  it('installs a voice with espeak-ng-data/ and replaces an incomplete copy', async () => {
    const entry = findModel('piper-en-amy')!;
    const dest = fresh('dest');
    mkdirSync(join(dest, 'piper-en-amy'));
    writeFileSync(join(dest, 'piper-en-amy', 'tokens.txt'), 'old');
    const path = await fetchModel('piper-en-amy', dest, {
      fetchImpl: serving(buildArchive(entry, entry.files)),
    });
    expect(existsSync(join(path, 'espeak-ng-data', 'phontab'))).toBe(true);
    expect(readFileSync(join(path, 'tokens.txt'), 'utf8')).toBe(TOKENS);
    expect(readdirSync(dest)).toEqual(['piper-en-amy']);
    expect(() => new SherpaTts({ modelDir: path })).not.toThrow();
  });

  it('reports an HTTP failure with the status and the URL', async () => {
    const entry = findModel('kokoro-en')!;
    const dest = fresh('dest');
    const notFound = (async () =>
      new Response('Not Found', { status: 404, statusText: 'Not Found' })) as typeof fetch;
    const error = await rejection(fetchModel('kokoro-en', dest, { fetchImpl: notFound }));
    expect(error.message).toContain('HTTP 404');
    expect(error.message).toContain(entry.url);
    expect(readdirSync(dest)).toEqual([]);
  });

  it('explains a machine without network and how to copy the folder by hand', async () => {
    const entry = findModel('whisper-tiny')!;
    const dest = fresh('dest');
    const dnsFailure = (async () => {
      throw new TypeError('fetch failed', {
        cause: Object.assign(new Error('getaddrinfo ENOTFOUND github.com'), {
          code: 'ENOTFOUND',
          hostname: 'github.com',
        }),
      });
    }) as typeof fetch;
    const error = await rejection(fetchModel('whisper-tiny', dest, { fetchImpl: dnsFailure }));
    expect(error.message).toContain('cannot reach github.com');
    expect(error.message).toContain('ENOTFOUND');
    expect(error.message).toContain(`curl -LO ${entry.url}`);
    expect(error.message).toContain(`copy the folder ${entry.folder}`);
    expect(error.message).toContain(join(dest, 'whisper-tiny'));
    expect(readdirSync(dest)).toEqual([]);
  });

  it('rejects an archive that lacks a required file and installs nothing', async () => {
    const entry = findModel('whisper-tiny')!;
    const archive = buildArchive(
      entry,
      entry.files.filter((f) => f !== 'tiny-decoder.int8.onnx'),
    );
    const dest = fresh('dest');
    const error = await rejection(fetchModel('whisper-tiny', dest, { fetchImpl: serving(archive) }));
    expect(error.message).toContain('tiny-decoder.int8.onnx');
    expect(error.message).not.toContain('tiny-tokens.txt');
    expect(existsSync(join(dest, 'whisper-tiny'))).toBe(false);
    expect(readdirSync(dest)).toEqual([]);
  });

  it('rejects a body that is not a bzip2 tarball', async () => {
    const dest = fresh('dest');
    const error = await rejection(
      fetchModel('kokoro-en', dest, { fetchImpl: serving(Buffer.from('<html>rate limited</html>')) }),
    );
    expect(error.message).toContain('cannot unpack kokoro-en-v0_19.tar.bz2');
    expect(readdirSync(dest)).toEqual([]);
  });
});
