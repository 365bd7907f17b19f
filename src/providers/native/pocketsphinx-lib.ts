// The libpocketsphinx (Debian bookworm, 5prealpha API) binding via koffi. The heavy calls
// (ps_process_raw, ps_end_utt) run on koffi's worker threads so the event loop stays free.
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
    args: ps.func('const ps_arg_t *ps_args(void)'),
    init: ps.func('ps_decoder_t *ps_init(ps_cmd_ln_t *config)'),
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
  return bindings;
}

const NON_SPEECH = /^(<s>|<\/s>|<sil>|\[.*\]|\+\+.*\+\+)$/;

/** Creates a decoder with the general language model as its default search ("_default"). */
export function createDecoder(modelDir = DEFAULT_MODEL_DIR): PocketsphinxDecoder {
  const b = bind();
  const flags: Record<string, string> = {
    '-hmm': `${modelDir}/en-us`,
    '-lm': `${modelDir}/en-us.lm.bin`,
    '-dict': `${modelDir}/cmudict-en-us.dict`,
    '-logfn': '/dev/null',
  };
  const variadic: unknown[] = [];
  for (const [key, value] of Object.entries(flags)) variadic.push('str', key, 'str', value);
  variadic.push('str', null);
  const config = b.cmdLnInit!(null, b.args!(), 1, ...variadic);
  const decoder = config ? b.init!(config) : null;
  if (!decoder)
    throw new Error(
      `pocketsphinx could not load its model from ${modelDir} (apt-get install pocketsphinx-en-us)`,
    );
  let busy: Promise<unknown> = Promise.resolve();
  let pending = 0;
  const lexicon = new Map<string, string[] | null>();
  const call = (fn: Fn, ...args: unknown[]) =>
    new Promise<number>((resolve, reject) =>
      fn.async(...args, (error: unknown, rc: number) => (error ? reject(error) : resolve(rc))),
    );

  return {
    get pending() {
      return pending;
    },
    addGrammar(name, jsgf) {
      if (b.setJsgf!(decoder, name, jsgf) < 0) throw new Error(`pocketsphinx refused grammar "${name}"`);
    },
    phones(word) {
      const key = word.toLowerCase();
      if (!lexicon.has(key)) {
        const found = b.lookupWord!(decoder, key) as string | null;
        lexicon.set(key, found ? found.trim().split(/\s+/) : null);
      }
      return lexicon.get(key) ?? null;
    },
    decode(search, pcm) {
      // One decoder, one utterance at a time.
      const run = async (): Promise<Hypothesis> => {
        if (b.setSearch!(decoder, search) < 0) throw new Error(`no pocketsphinx search "${search}"`);
        if (b.startUtt!(decoder) < 0) throw new Error('ps_start_utt failed');
        await call(b.processRaw!, decoder, pcm, pcm.length, 0, 1);
        await call(b.endUtt!, decoder);
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
  };
}
