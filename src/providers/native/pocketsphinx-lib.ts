// The libpocketsphinx (Debian bookworm, 5prealpha API) binding via koffi. The heavy calls
// (ps_process_raw, ps_end_utt, and ps_init for decoders loaded while serving) run on koffi's worker
// threads so the event loop stays free.
import koffi, { type LibraryHandle } from 'koffi';

export const DEFAULT_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';

export interface Hypothesis {
  text: string;
  /** Speech frames (10 ms) of the words, silences and fillers excluded. */
  frames: number;
}

export interface PocketsphinxDecoder {
  addGrammar(name: string, jsgf: string): void;
  /** The word's phones from the dictionary (first pronunciation), or null when it is unknown. */
  phones(word: string): string[] | null;
  decode(search: string, pcm16k: Int16Array): Promise<Hypothesis>;
  /** Utterances queued or running on this decoder. */
  readonly pending: number;
  /** Utterances this decoder has decoded (each search pass counts once): what a job really cost. */
  readonly decoded: number;
  /** Releases the native decoder once its queued utterances are done; later decodes reject. */
  free(): Promise<void>;
}

type Fn = ReturnType<LibraryHandle['func']>;
let bindings: Record<string, Fn> | undefined;

function bind(): Record<string, Fn> {
  if (bindings) return bindings;
  let sphinxbase: LibraryHandle;
  let ps: LibraryHandle;
  try {
    sphinxbase = koffi.load('libsphinxbase.so.3', { global: true });
    ps = koffi.load('libpocketsphinx.so.3');
  } catch (error) {
    throw new Error(
      `pocketsphinx library not found (${(error as Error).message}); install it: apt-get install libpocketsphinx3 pocketsphinx-en-us`,
    );
  }
  koffi.opaque('ps_cmd_ln_t');
  koffi.opaque('ps_decoder_t');
  koffi.opaque('ps_arg_t');
  koffi.opaque('ps_seg_t');
  // ps_lookup_word returns a string the caller must free: a disposable type frees it after decoding.
  const ownedString = koffi.disposable('ps_owned_str', 'str');
  bindings = {
    cmdLnInit: sphinxbase.func(
      'ps_cmd_ln_t *cmd_ln_init(ps_cmd_ln_t *inout, const ps_arg_t *defn, int strict, ...)',
    ),
    setLogFile: sphinxbase.func('int err_set_logfile(const char *path)'),
    args: ps.func('const ps_arg_t *ps_args(void)'),
    init: ps.func('ps_decoder_t *ps_init(ps_cmd_ln_t *config)'),
    free: ps.func('int ps_free(ps_decoder_t *ps)'),
    startUtt: ps.func('int ps_start_utt(ps_decoder_t *ps)'),
    processRaw: ps.func(
      'int ps_process_raw(ps_decoder_t *ps, const int16_t *data, size_t n, int no_search, int full_utt)',
    ),
    endUtt: ps.func('int ps_end_utt(ps_decoder_t *ps)'),
    getHyp: ps.func('const char *ps_get_hyp(ps_decoder_t *ps, _Out_ int32_t *score)'),
    setJsgf: ps.func('int ps_set_jsgf_string(ps_decoder_t *ps, const char *name, const char *jsgf)'),
    setSearch: ps.func('int ps_set_search(ps_decoder_t *ps, const char *name)'),
    lookupWord: ps.func('ps_lookup_word', ownedString, ['ps_decoder_t *', 'str']),
    segIter: ps.func('ps_seg_t *ps_seg_iter(ps_decoder_t *ps)'),
    segNext: ps.func('ps_seg_t *ps_seg_next(ps_seg_t *seg)'),
    segWord: ps.func('const char *ps_seg_word(ps_seg_t *seg)'),
    segFrames: ps.func('void ps_seg_frames(ps_seg_t *seg, _Out_ int *sf, _Out_ int *ef)'),
  };
  // The log file is process-wide in sphinxbase: setting it per decoder (-logfn) would fclose the FILE*
  // another decoder may be writing to on a worker thread. Silence it once, before any decoder exists.
  bindings.setLogFile!('/dev/null');
  return bindings;
}

const NON_SPEECH = /^(<s>|<\/s>|<sil>|\[.*\]|\+\+.*\+\+)$/;

/** A command line for ps_init: the general language model is the default search ("_default"). */
function decoderConfig(b: Record<string, Fn>, modelDir: string): unknown {
  const flags: Record<string, string> = {
    '-hmm': `${modelDir}/en-us`,
    '-lm': `${modelDir}/en-us.lm.bin`,
    '-dict': `${modelDir}/cmudict-en-us.dict`,
  };
  const variadic: unknown[] = [];
  for (const [key, value] of Object.entries(flags)) variadic.push('str', key, 'str', value);
  variadic.push('str', null);
  return b.cmdLnInit!(null, b.args!(), 1, ...variadic);
}

const loadFailed = (modelDir: string) =>
  new Error(`pocketsphinx could not load its model from ${modelDir} (apt-get install pocketsphinx-en-us)`);

const call = (fn: Fn, ...args: unknown[]) =>
  new Promise<unknown>((resolve, reject) =>
    fn.async(...args, (error: unknown, result: unknown) => (error ? reject(error) : resolve(result))),
  );

/** Creates a decoder at once; the model load (≈0.4–0.7 s, ≈90 MB) blocks the event loop. */
export function createDecoder(modelDir = DEFAULT_MODEL_DIR): PocketsphinxDecoder {
  const b = bind();
  const config = decoderConfig(b, modelDir);
  const decoder = config ? b.init!(config) : null;
  if (!decoder) throw loadFailed(modelDir);
  return wrap(b, decoder);
}

/** Creates a decoder with the model loaded on a worker thread: for pools that grow while serving. */
export async function loadDecoder(modelDir = DEFAULT_MODEL_DIR): Promise<PocketsphinxDecoder> {
  const b = bind();
  const config = decoderConfig(b, modelDir);
  const decoder = config ? await call(b.init!, config) : null;
  if (!decoder) throw loadFailed(modelDir);
  return wrap(b, decoder);
}

function wrap(b: Record<string, Fn>, decoder: unknown): PocketsphinxDecoder {
  let busy: Promise<unknown> = Promise.resolve();
  let pending = 0;
  let decoded = 0;
  let freed = false;
  const lexicon = new Map<string, string[] | null>();

  return {
    get pending() {
      return pending;
    },
    get decoded() {
      return decoded;
    },
    addGrammar(name, jsgf) {
      if (b.setJsgf!(decoder, name, jsgf) < 0) throw new Error(`pocketsphinx refused grammar "${name}"`);
    },
    phones(word) {
      const key = word.toLowerCase();
      if (!lexicon.has(key)) {
        const found = freed ? null : (b.lookupWord!(decoder, key) as string | null);
        lexicon.set(key, found ? found.trim().split(/\s+/) : null);
      }
      return lexicon.get(key) ?? null;
    },
    decode(search, pcm) {
      // One decoder, one utterance at a time: a guard, the recognition queue never overlaps them.
      const run = async (): Promise<Hypothesis> => {
        if (freed) throw new Error('pocketsphinx decoder was freed');
        if (b.setSearch!(decoder, search) < 0) throw new Error(`no pocketsphinx search "${search}"`);
        if (b.startUtt!(decoder) < 0) throw new Error('ps_start_utt failed');
        await call(b.processRaw!, decoder, pcm, pcm.length, 0, 1);
        await call(b.endUtt!, decoder);
        decoded++;
        const text = ((b.getHyp!(decoder, [0]) as string | null) ?? '').trim();
        let frames = 0;
        for (let seg = b.segIter!(decoder); seg; seg = b.segNext!(seg)) {
          if (NON_SPEECH.test(b.segWord!(seg) as string)) continue;
          const start = [0];
          const end = [0];
          b.segFrames!(seg, start, end);
          frames += end[0]! - start[0]! + 1;
        }
        return { text, frames };
      };
      pending++;
      const result = busy.then(run, run).finally(() => {
        pending--;
      });
      busy = result.catch(() => undefined);
      return result;
    },
    free() {
      // Behind the utterances already queued: ps_free under a running ps_process_raw would crash.
      const done = busy.then(() => {
        if (freed) return;
        freed = true;
        b.free!(decoder);
      });
      busy = done;
      return done;
    },
  };
}
