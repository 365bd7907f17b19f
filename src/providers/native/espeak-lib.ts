// The libespeak-ng binding (koffi). Loaded once per process.
import koffi, { type LibraryHandle } from 'koffi';

const AUDIO_OUTPUT_SYNCHRONOUS = 2;
const POS_CHARACTER = 1;
const ESPEAK_CHARS_UTF8 = 1;
const PARAM_RATE = 1;
const PARAM_PITCH = 3;

export interface EspeakLib {
  sampleRate: number;
  synthesize(
    text: string,
    voice: { voice: string; rate: number; pitch: number },
    signal: AbortSignal,
    onAudio: (pcm: Int16Array) => void,
  ): Promise<void>;
}

let instance: EspeakLib | undefined;

export function loadEspeak(): EspeakLib {
  if (instance) return instance;
  let lib: LibraryHandle;
  try {
    lib = koffi.load('libespeak-ng.so.1');
  } catch (error) {
    throw new Error(
      `espeak-ng library not found (${(error as Error).message}); install it: apt-get install libespeak-ng1`,
    );
  }
  const SynthCallback = koffi.proto('int EspeakSynthCallback(int16_t *wav, int numsamples, void *events)');
  const initialize = lib.func(
    'int espeak_Initialize(int output, int buflength, const char *path, int options)',
  );
  const setCallback = lib.func('void espeak_SetSynthCallback(EspeakSynthCallback *cb)');
  const setVoice = lib.func('int espeak_SetVoiceByName(const char *name)');
  const setParameter = lib.func('int espeak_SetParameter(int parameter, int value, int relative)');
  const synth = lib.func(
    'int espeak_Synth(const char *text, size_t size, unsigned int position, int position_type, unsigned int end_position, unsigned int flags, void *uid, void *user_data)',
  );
  const sampleRate = initialize(AUDIO_OUTPUT_SYNCHRONOUS, 200, null, 0) as number;
  if (sampleRate <= 0) throw new Error('espeak-ng failed to initialise (is espeak-ng-data installed?)');

  // One global callback; it routes audio to whichever job is running (jobs never overlap).
  let current: { onAudio: (pcm: Int16Array) => void; signal: AbortSignal } | undefined;
  const callback = koffi.register((wav: unknown, count: number) => {
    if (!current) return 1;
    if (current.signal.aborted) return 1; // tells espeak to stop synthesising
    if (count > 0 && wav) current.onAudio(Int16Array.from(koffi.decode(wav, 'int16_t', count) as number[]));
    return 0;
  }, koffi.pointer(SynthCallback));
  setCallback(callback);

  let appliedVoice = '';
  // espeak-ng is one global engine with one callback: every caller in the process queues here.
  let queue: Promise<unknown> = Promise.resolve();
  const run = (
    text: string,
    voice: { voice: string; rate: number; pitch: number },
    signal: AbortSignal,
    onAudio: (pcm: Int16Array) => void,
  ): Promise<void> => {
    if (signal.aborted) return Promise.resolve();
    if (voice.voice !== appliedVoice) {
      if (setVoice(voice.voice) !== 0) throw new Error(`espeak-ng has no voice "${voice.voice}"`);
      appliedVoice = voice.voice;
    }
    setParameter(PARAM_RATE, voice.rate, 0);
    setParameter(PARAM_PITCH, voice.pitch, 0);
    current = { onAudio, signal };
    const bytes = Buffer.byteLength(text) + 1;
    return new Promise<void>((resolve, reject) => {
      synth.async(
        text,
        bytes,
        0,
        POS_CHARACTER,
        0,
        ESPEAK_CHARS_UTF8,
        null,
        null,
        (error: unknown, rc: number) => {
          current = undefined;
          // rc 0 = done; an abort from the callback is not an error
          if (error) reject(error);
          else if (rc !== 0 && !signal.aborted) reject(new Error(`espeak_Synth failed (${rc})`));
          else resolve();
        },
      );
    });
  };
  instance = {
    sampleRate,
    synthesize(text, voice, signal, onAudio) {
      const job = queue.then(() => run(text, voice, signal, onAudio));
      queue = job.catch(() => undefined);
      return job;
    },
  };
  return instance;
}
