// The real recogniser behind its queue: espeak-ng speech, through Opus as the robot sends it, into
// PocketsphinxAsr's decoder pool. The counters say which jobs reached a decoder and how many search passes
// ran; the texts say the results are still right. One decoder (workers: 1) makes "queued" deterministic.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { concatPcm, OpusFrameEncoder, OpusPacketDecoder } from '../../src/audio/opus.js';
import { speechPcm16k } from '../../src/device/voice.js';
import { PocketsphinxAsr, type PocketsphinxStats } from '../../src/providers/asr/pocketsphinx.js';
import { phraseTable } from '../../src/robot/phrases.js';
import { VoiceMetrics } from '../../src/voice/metrics.js';
import { parsePrometheus } from '../support/prom.js';

// Phrases pocketsphinx gets right whatever the decoder decoded before (measured here, see the report).
const PHRASES = [
  'what is the weather like today',
  'go to sleep',
  'tell me a story',
  'how are you today',
  'hello there',
  'security mode',
] as const;
type Phrase = (typeof PHRASES)[number];

const speech = new Map<Phrase, Int16Array>();
let single: PocketsphinxAsr;

/** As the server hears it: 60 ms Opus packets decoded again at 16 kHz. */
async function heard(text: string): Promise<Int16Array> {
  const encoder = new OpusFrameEncoder(16_000, 60);
  const decoder = new OpusPacketDecoder(16_000);
  let pcm: Int16Array = new Int16Array(0);
  for (const packet of [...encoder.encode(await speechPcm16k(text)), ...encoder.flush()])
    pcm = concatPcm(pcm, decoder.decode(packet) ?? new Int16Array(0));
  return pcm;
}

const commands = phraseTable('Pip').flatMap((row) => row.phrases);
const live = () => new AbortController().signal;
const aborted = () => AbortSignal.abort();

/** What each job ended with: its text, or its error's name (handled at once: no unhandled rejection). */
function settled(jobs: Array<Promise<string>>): Promise<string[]> {
  return Promise.all(jobs.map((job) => job.catch((error: Error) => error.name)));
}

/** Counter increases since `before`. */
function delta(asr: PocketsphinxAsr, before: PocketsphinxStats) {
  const now = asr.queueStats();
  return {
    started: now.started - before.started,
    cancelled: now.cancelled - before.cancelled,
    passes: now.passes - before.passes,
    secondPassSkipped: now.secondPassSkipped - before.secondPassSkipped,
  };
}

beforeAll(async () => {
  for (const phrase of PHRASES) speech.set(phrase, await heard(phrase));
  single = new PocketsphinxAsr({ commands, queue: { workers: 1, maxQueued: 7, maxQueuedPerDevice: 3 } });
}, 60_000);

afterAll(() => single?.close());

const say = (asr: PocketsphinxAsr, phrase: Phrase, signal: AbortSignal, deviceId?: string) =>
  asr.transcribe(speech.get(phrase)!, signal, { deviceId });

describe('cancelled recognitions never reach the decoder', () => {
  it('six already-cancelled jobs ahead: the decoder runs only the live one, with the right text', async () => {
    const before = single.queueStats();
    const stale = settled(
      Array.from({ length: 6 }, (_, i) => say(single, 'hello there', aborted(), `stale-${i}`)),
    );
    const text = await say(single, 'what is the weather like today', live(), 'live');
    expect(await stale).toEqual(Array(6).fill('AbortError'));
    expect(text).toBe('what is the weather like today');
    expect(delta(single, before)).toEqual({ started: 1, cancelled: 6, passes: 2, secondPassSkipped: 0 });
  });

  it('six jobs cancelled while queued behind a busy decoder leave at once; the next live job runs next', async () => {
    const before = single.queueStats();
    const busy = say(single, 'tell me a story', live(), 'busy');
    const controllers = Array.from({ length: 6 }, () => new AbortController());
    const stale = settled(controllers.map((c, i) => say(single, 'hello there', c.signal, `stale-${i}`)));
    expect(single.queueStats()).toMatchObject({ running: 1, queued: 6 });
    for (const controller of controllers) controller.abort();
    expect(single.queueStats()).toMatchObject({ running: 1, queued: 0 });
    expect(await stale).toEqual(Array(6).fill('AbortError'));
    const next = say(single, 'go to sleep', live(), 'live');
    expect(await busy).toBe('tell me a story');
    expect(await next).toBe('go to sleep');
    expect(delta(single, before)).toEqual({ started: 2, cancelled: 6, passes: 4, secondPassSkipped: 0 });
  });

  it('a job cancelled during its first pass skips the command pass and returns the first pass text', async () => {
    const before = single.queueStats();
    const controller = new AbortController();
    const job = say(single, 'what is the weather like today', controller.signal, 'dev');
    // Once the job's microtasks ran, its first pass is on a worker thread, where 2.3 s of speech takes
    // hundreds of milliseconds: the abort lands in the middle of it.
    setImmediate(() => controller.abort());
    expect(await job).toBe('what is the weather like today');
    expect(delta(single, before)).toEqual({ started: 1, cancelled: 0, passes: 1, secondPassSkipped: 1 });
  });
});

describe('fairness and the bound', () => {
  it("a second device's utterance is recognised before the first device's backlog", async () => {
    const finished: string[] = [];
    const track = (label: string, result: Promise<string>) =>
      result.then((text) => {
        finished.push(label);
        return text;
      });
    const a1 = track('a1', say(single, 'tell me a story', live(), 'dev-a'));
    const a2 = track('a2', say(single, 'how are you today', live(), 'dev-a'));
    const a3 = track('a3', say(single, 'hello there', live(), 'dev-a'));
    const b1 = track('b1', say(single, 'go to sleep', live(), 'dev-b'));
    expect(await Promise.all([a1, a2, a3, b1])).toEqual([
      'tell me a story',
      'how are you today',
      'hello there',
      'go to sleep',
    ]);
    expect(finished).toEqual(['a1', 'b1', 'a2', 'a3']);
  }, 60_000);

  it('a full queue refuses the utterance with a clear error, counted in the voice metrics', async () => {
    const metrics = new VoiceMetrics(() => 0, single);
    const scrape = async () => parsePrometheus((await metrics.text()).body);
    const droppedBefore = (await scrape()).value('deskbot_voice_asr_queue_dropped_total', { reason: 'full' });
    const running = say(single, 'security mode', live(), 'dev-0');
    const controllers = Array.from({ length: 7 }, () => new AbortController());
    const waiting = settled(controllers.map((c, i) => say(single, 'hello there', c.signal, `dev-${i + 1}`)));
    const refused = say(single, 'hello there', live(), 'dev-8');
    await expect(refused).rejects.toThrow(/recognition queue is full/);

    const during = await scrape();
    expect(during.value('deskbot_voice_asr_queue_dropped_total', { reason: 'full' })).toBe(droppedBefore + 1);
    expect(during.value('deskbot_voice_asr_queued')).toBe(7);
    expect(during.value('deskbot_voice_asr_running')).toBe(1);
    expect(during.types.get('deskbot_voice_asr_queue_dropped_total')).toBe('counter');

    for (const controller of controllers) controller.abort();
    expect(await waiting).toEqual(Array(7).fill('AbortError'));
    expect(await running).toBe('security mode');
    const after = await scrape();
    expect(after.value('deskbot_voice_asr_queued')).toBe(0);
    expect(after.value('deskbot_voice_asr_jobs_cancelled_total')).toBe(single.queueStats().cancelled);
    expect(after.value('deskbot_voice_asr_jobs_started_total')).toBe(single.queueStats().started);
    expect(after.value('deskbot_voice_asr_passes_total')).toBe(single.queueStats().passes);
  });
});

describe('a pool of decoders', () => {
  let pool: PocketsphinxAsr | undefined;
  afterAll(() => pool?.close());

  it('two decoders (the second loaded on demand, with the command grammar) give the same texts', async () => {
    pool = new PocketsphinxAsr({ commands, queue: { workers: 2 } });
    expect(pool.queueStats()).toMatchObject({ workers: 2, decoders: 1 });
    const phrases: Phrase[] = [
      'what is the weather like today',
      'go to sleep',
      'how are you today',
      'security mode',
    ];
    const texts = await Promise.all(phrases.map((phrase, i) => say(pool!, phrase, live(), `dev-${i}`)));
    expect(texts).toEqual(phrases);
    // Both passes ran for every job: the second decoder has the "commands" search too.
    expect(pool.queueStats()).toMatchObject({ decoders: 2, started: 4, passes: 8, running: 0, queued: 0 });
  }, 60_000);
});
