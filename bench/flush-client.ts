// A client like the xiaozhi-esp32-server browser test page, for the stop-margin bench: it records when each
// downlink frame of a reply arrived and when `tts stop` came, and a model of the page's player tells how much
// of the reply's speech the page played before `tts stop` flushed it.
//
// The page's player (xinnan-tech/xiaozhi-esp32-server main/xiaozhi-server/test/js: core/audio/player.js,
// core/audio/stream-context.js, utils/blocking-queue.js, core/network/websocket.js), modelled rule by rule:
// - receive: after page load (and after a `tts stop` that lands inside a batch window) it waits for 6 packets,
//   or 400 ms after the first; after that every packet waits up to 30 ms for company before the decoder;
// - player: it hands audio to Web Audio only once it holds 240 ms (2 × MIN_AUDIO_DURATION 0.12 s) decoded,
//   in 120 ms chunks while 120 ms remain, each scheduled at max(end of the previous chunk, now): a late chunk
//   starts late and the rest of the reply after it. Under 240 ms it waits for more audio, with no timeout;
// - `tts stop`: clearAllAudio() drops every packet and sample not yet scheduled and stops the last scheduled
//   chunk (Web Audio chunks scheduled before it still play).
// So the page loses audio two ways: the reply's last < 240 ms, never scheduled because no more audio comes
// (whatever the stop margin), and the last chunk, when `tts stop` comes before it has played.
import type { VirtualRobot } from '../src/device/robot.js';
import type { ServerFrame } from '../src/protocol/index.js';

export interface PlayerRules {
  /** Until the first batch: wait for this many packets … */
  gateFrames: number;
  /** … or this long after the first one. */
  gateTimeoutMs: number;
  /** Later packets wait this long for company before they go to the decoder. */
  batchMs: number;
  /** The page decodes at this rate; all its thresholds are in samples at it. */
  sampleRate: number;
  /** Audio is scheduled only while this much is decoded and unscheduled. */
  startBufferMs: number;
  /** Scheduled in chunks of this much. */
  chunkMs: number;
}

/** The page's constants (player.js: 6 packets / 400 ms, 30 ms; stream-context.js: 2 × 0.12 s, 0.12 s). */
export const TEST_PAGE_PLAYER: PlayerRules = {
  gateFrames: 6,
  gateTimeoutMs: 400,
  batchMs: 30,
  sampleRate: 16_000,
  startBufferMs: 240,
  chunkMs: 120,
};

/** One downlink audio frame as heard: arrival (ms, this process's clock), length, and whether it is speech. */
export interface HeardFrame {
  atMs: number;
  durationMs: number;
  speech: boolean;
}

export interface HeardReply {
  frames: HeardFrame[];
  stopAtMs: number;
}

export interface ReplyOutcome {
  speechMs: number;
  /** Speech never played. */
  lostMs: number;
  /** … of it still queued (not yet given to Web Audio) when `tts stop` came. */
  lostUnscheduledMs: number;
  /** … of it in the last scheduled chunk, which `tts stop` stopped. */
  lostCutMs: number;
  /** When the page played its last speech sample of this reply (NaN: none). */
  speechEndAtMs: number;
  /** When a device that plays each frame as it arrives (the firmware, the pacer's model) ends the speech. */
  arrivalSpeechEndAtMs: number;
  stopAtMs: number;
}

type Seg = { samples: number; speech: boolean; reply: number };
type Chunk = { startMs: number; endMs: number; segs: Seg[] };
type Site = 'top' | 'afterStartWait';

/** A FIFO of sample runs, split where a take ends inside one. */
class Samples {
  private segs: Seg[] = [];
  size = 0;

  push(seg: Seg): void {
    if (seg.samples <= 0) return;
    this.segs.push(seg);
    this.size += seg.samples;
  }

  pushAll(segs: Seg[]): void {
    for (const seg of segs) this.push(seg);
  }

  take(samples: number): Seg[] {
    const out: Seg[] = [];
    let left = samples;
    while (left > 0 && this.segs.length > 0) {
      const head = this.segs[0]!;
      if (head.samples <= left) {
        out.push(this.segs.shift()!);
        left -= head.samples;
      } else {
        out.push({ ...head, samples: left });
        this.segs[0] = { ...head, samples: head.samples - left };
        left = 0;
      }
    }
    this.size -= samples - left;
    return out;
  }

  takeAll(): Seg[] {
    return this.take(this.size);
  }
}

/** The page's player as a state machine driven by arrivals, timers and stops (times in ms). */
class PagePlayer {
  private readonly minSamples: number;
  private readonly chunkSamples: number;
  // Receive stage (AudioPlayer.queue and its startAudioBuffering loop).
  private received: Seg[] = [];
  private gate = true;
  private waitingFirst = true;
  timerAtMs: number | null = null;
  // Player stage (StreamingContext: activeQueue, queue, startPlaying).
  private readonly active = new Samples();
  private readonly queue = new Samples();
  private playing = false;
  private pending: { site: Site; stage: 'first' | 'waiter'; num: number } | null = null;
  private scheduledEndMs = 0;
  private last: Chunk | null = null;
  readonly chunks: Chunk[] = [];
  /** Speech samples lost per reply: dropped unscheduled, and cut from the last chunk. */
  readonly dropped = new Map<number, { unscheduled: number; cut: number }>();

  constructor(private readonly rules: PlayerRules) {
    this.minSamples = this.samplesOf(rules.startBufferMs);
    this.chunkSamples = this.samplesOf(rules.chunkMs);
    // startPlaying() begins by waiting for its first 240 ms.
    this.getQueue('afterStartWait');
  }

  samplesOf(ms: number): number {
    return Math.round((ms * this.rules.sampleRate) / 1000);
  }

  arrive(seg: Seg, nowMs: number): void {
    this.received.push(seg);
    if (this.waitingFirst) {
      this.waitingFirst = false;
      this.dequeue(nowMs);
    } else if (this.gate && this.timerAtMs !== null && this.received.length >= this.rules.gateFrames) {
      this.timerAtMs = null;
      this.handOver(nowMs);
    }
  }

  /** The receive loop's pending dequeue timed out: what is there goes to the decoder. */
  fireTimer(nowMs: number): void {
    this.timerAtMs = null;
    if (!this.gate && this.received.length === 0) {
      this.gate = true; // a stop emptied the batch: the page's inner loop breaks back to the 6-packet gate
      this.dequeue(nowMs);
      return;
    }
    this.handOver(nowMs);
  }

  /** clearAllAudio(): drop everything unscheduled, stop the last scheduled chunk. */
  stop(nowMs: number): void {
    const lose = (segs: Seg[]) => {
      for (const seg of segs) if (seg.speech) this.lossOf(seg.reply).unscheduled += seg.samples;
    };
    lose(this.received);
    this.received = [];
    lose(this.active.takeAll());
    lose(this.queue.takeAll());
    const last = this.last;
    if (last && last.endMs > nowMs) {
      const playedMs = Math.max(0, nowMs - last.startMs);
      let offset = 0;
      const keep = this.samplesOf(playedMs);
      for (const seg of last.segs) {
        const cut = Math.min(seg.samples, Math.max(0, offset + seg.samples - keep));
        if (seg.speech && cut > 0) this.lossOf(seg.reply).cut += cut;
        offset += seg.samples;
      }
      last.endMs = last.startMs + playedMs;
    }
    this.last = null;
    this.playing = false;
    this.scheduledEndMs = nowMs;
  }

  private lossOf(reply: number): { unscheduled: number; cut: number } {
    const loss = this.dropped.get(reply) ?? { unscheduled: 0, cut: 0 };
    this.dropped.set(reply, loss);
    return loss;
  }

  /** A `queue.dequeue(min, timeout)` call of the receive loop (6/400 at the gate, 99/30 after). */
  private dequeue(nowMs: number): void {
    if (this.received.length === 0) {
      this.waitingFirst = true;
      return;
    }
    if (this.gate && this.received.length >= this.rules.gateFrames) {
      this.handOver(nowMs);
      return;
    }
    this.timerAtMs = nowMs + (this.gate ? this.rules.gateTimeoutMs : this.rules.batchMs);
  }

  private handOver(nowMs: number): void {
    const batch = this.received;
    this.received = [];
    this.gate = false;
    if (batch.length > 0) this.decode(batch, nowMs);
    this.dequeue(nowMs);
  }

  /** Decoded samples enter activeQueue one by one; a waiting getQueue takes exactly its count. */
  private decode(batch: Seg[], nowMs: number): void {
    let resumed: Site | null = null;
    for (const seg of batch) {
      const need = this.pending?.stage === 'waiter' ? this.pending.num - this.active.size : Infinity;
      if (seg.samples < need) {
        this.active.push(seg);
        continue;
      }
      this.active.push({ ...seg, samples: need });
      this.queue.pushAll(this.active.takeAll());
      resumed = this.pending!.site;
      this.pending = null;
      this.active.push({ ...seg, samples: seg.samples - need });
    }
    // A getQueue that found activeQueue empty wakes after the whole batch is in, and takes all if enough.
    const first = this.pending;
    if (resumed === null && first?.stage === 'first' && this.active.size > 0) {
      if (this.active.size >= first.num) {
        this.queue.pushAll(this.active.takeAll());
        this.pending = null;
        resumed = first.site;
      } else {
        this.pending = { ...first, stage: 'waiter' };
      }
    }
    if (resumed !== null) this.play(resumed, nowMs);
  }

  /** getQueue(minSamples): true when it returned at once (enough decoded), else it now waits. */
  private getQueue(site: Site): boolean {
    const num = this.minSamples - this.queue.size > 0 ? this.minSamples - this.queue.size : 1;
    if (this.active.size === 0) {
      this.pending = { site, stage: 'first', num };
      return false;
    }
    if (this.active.size >= num) {
      this.queue.pushAll(this.active.takeAll());
      return true;
    }
    this.pending = { site, stage: 'waiter', num };
    return false;
  }

  /** startPlaying()'s loop, from `site` until it waits for audio again. */
  private play(site: Site, nowMs: number): void {
    for (;;) {
      if (site === 'top' && !this.playing && this.queue.size < this.minSamples) {
        if (!this.getQueue('afterStartWait')) return;
      }
      this.playing = true;
      while (this.playing && this.queue.size > 0) {
        const segs = this.queue.take(Math.min(this.queue.size, this.chunkSamples));
        const samples = segs.reduce((n, s) => n + s.samples, 0);
        const startMs = Math.max(this.scheduledEndMs, nowMs);
        const chunk = { startMs, endMs: startMs + (samples * 1000) / this.rules.sampleRate, segs };
        this.chunks.push(chunk);
        this.scheduledEndMs = chunk.endMs;
        this.last = chunk;
        if (this.queue.size < this.chunkSamples) break;
      }
      if (!this.getQueue('top')) return;
      site = 'top';
    }
  }
}

/**
 * Plays one session's replies (in order, as one page would) through the page model, with each `tts stop` moved
 * by `stopShiftMs` (one for all, or per reply index: what another margin would have done), and says what each
 * reply lost.
 */
export function playLikeTestPage(
  replies: HeardReply[],
  stopShiftMs: number | ((reply: number) => number) = 0,
  rules: PlayerRules = TEST_PAGE_PLAYER,
): ReplyOutcome[] {
  const shiftOf = typeof stopShiftMs === 'number' ? () => stopShiftMs : stopShiftMs;
  const player = new PagePlayer(rules);
  type Event = { atMs: number; order: number; run: () => void };
  const events: Event[] = [];
  replies.forEach((reply, index) => {
    for (const frame of reply.frames) {
      const seg = { samples: player.samplesOf(frame.durationMs), speech: frame.speech, reply: index };
      events.push({ atMs: frame.atMs, order: 0, run: () => player.arrive(seg, frame.atMs) });
    }
    const stopAtMs = reply.stopAtMs + shiftOf(index);
    events.push({ atMs: stopAtMs, order: 1, run: () => player.stop(stopAtMs) });
  });
  events.sort((a, b) => a.atMs - b.atMs || a.order - b.order);
  const fireTimersUntil = (atMs: number) => {
    while (player.timerAtMs !== null && player.timerAtMs <= atMs) player.fireTimer(player.timerAtMs);
  };
  for (const event of events) {
    fireTimersUntil(event.atMs);
    event.run();
  }
  fireTimersUntil(Number.POSITIVE_INFINITY);
  return replies.map((reply, index) => outcome(reply, index, player, shiftOf(index), rules.sampleRate));
}

function outcome(
  reply: HeardReply,
  index: number,
  player: PagePlayer,
  stopShiftMs: number,
  rate: number,
): ReplyOutcome {
  let speechEndAtMs = Number.NaN;
  let playedSamples = 0;
  for (const chunk of player.chunks) {
    let atMs = chunk.startMs;
    for (const seg of chunk.segs) {
      const endMs = Math.min(chunk.endMs, atMs + (seg.samples * 1000) / rate);
      if (seg.reply === index && seg.speech && endMs > atMs) {
        playedSamples += Math.round(((endMs - atMs) * rate) / 1000);
        speechEndAtMs = Number.isNaN(speechEndAtMs) ? endMs : Math.max(speechEndAtMs, endMs);
      }
      atMs += (seg.samples * 1000) / rate;
    }
  }
  let arrivalEndAtMs = Number.NEGATIVE_INFINITY;
  let arrivalSpeechEndAtMs = Number.NaN;
  let speechSamples = 0;
  for (const frame of reply.frames) {
    arrivalEndAtMs = Math.max(arrivalEndAtMs, frame.atMs) + frame.durationMs;
    if (!frame.speech) continue;
    arrivalSpeechEndAtMs = arrivalEndAtMs;
    speechSamples += player.samplesOf(frame.durationMs);
  }
  const dropped = player.dropped.get(index) ?? { unscheduled: 0, cut: 0 };
  const ms = (samples: number) => (samples * 1000) / rate;
  return {
    speechMs: ms(speechSamples),
    lostMs: ms(speechSamples - playedSamples),
    lostUnscheduledMs: ms(dropped.unscheduled),
    lostCutMs: ms(dropped.cut),
    speechEndAtMs,
    arrivalSpeechEndAtMs,
    stopAtMs: reply.stopAtMs + stopShiftMs,
  };
}

/** Louder than this anywhere in a frame is speech; the encoder's silence decodes to (near) zero. */
const SPEECH_PEAK = 200;

/**
 * The page's side of the wire, on a booted virtual robot: asks by `listen detect` (what the page's text box
 * sends) and records the reply until `tts stop`. Arrival times are taken as the events come, so a loaded
 * client sees them late, as the page's own event loop would.
 */
export class FlushClient {
  readonly replies: HeardReply[] = [];

  constructor(readonly robot: VirtualRobot) {}

  /** One question; resolves at `tts stop` with the reply heard (undefined: no reply within `timeoutMs`). */
  async ask(text: string, timeoutMs: number): Promise<HeardReply | undefined> {
    const { robot } = this;
    let frames: HeardFrame[] | undefined;
    let finish: (reply: HeardReply | undefined) => void = () => {};
    const done = new Promise<HeardReply | undefined>((resolve) => {
      finish = resolve;
    });
    const onFrame = (frame: ServerFrame) => {
      if (frame.type !== 'tts') return;
      if (frame.state === 'start') frames = [];
      if (frame.state === 'stop' && frames) finish({ frames, stopAtMs: performance.now() });
    };
    const onAudio = (pcm: Int16Array) => {
      const atMs = performance.now();
      let peak = 0;
      for (const sample of pcm) peak = Math.max(peak, Math.abs(sample));
      const durationMs = (pcm.length * 1000) / robot.downlinkSampleRate;
      frames?.push({ atMs, durationMs, speech: peak > SPEECH_PEAK });
    };
    robot.on('frame', onFrame);
    robot.on('audio', onAudio);
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    try {
      robot.listen('detect', 'manual', text);
      const reply = await done;
      if (reply) this.replies.push(reply);
      return reply;
    } finally {
      clearTimeout(timer);
      robot.off('frame', onFrame);
      robot.off('audio', onAudio);
    }
  }
}
