// Fixed-latency speech providers for the bench: they wait a set time, then answer at once, so that
// everything else between "end of utterance" and "first downlink frame" is time the server itself added.
// The VAD is the real Silero model: it is part of what the bench measures.
import { setTimeout as delay } from 'node:timers/promises';
import { SileroVad } from '../src/audio/silero.js';
import type { AsrProvider } from '../src/providers/asr/types.js';
import type { LlmProvider, LlmTurn } from '../src/providers/llm/types.js';
import type { TtsProvider } from '../src/providers/tts/types.js';
import type { VoiceProviders } from '../src/voice/providers.js';

export interface BenchLatencies {
  asrMs: number;
  llmMs: number;
  ttsMs: number;
  /** What the recogniser "hears"; empty makes every utterance too short (no reply): streaming only. */
  asrText: string;
  /** Seconds of speech the TTS yields per segment, and in how many chunks. */
  ttsSeconds: number;
  ttsChunks: number;
}

export const DEFAULT_LATENCIES: BenchLatencies = {
  asrMs: 50,
  llmMs: 100,
  ttsMs: 20,
  asrText: 'what is the weather like today',
  ttsSeconds: 1.5,
  ttsChunks: 3,
};

/** The reply's deltas; they follow the first token without delay, so the sentence is whole at once. */
export const REPLY_DELTAS = ['😊 It', ' is sunny', ' today.'];

export function nominalProviderMs(l: BenchLatencies): number {
  return l.asrMs + l.llmMs + l.ttsMs;
}

export class FixedAsr implements AsrProvider {
  readonly name = 'bench-asr';
  constructor(private readonly l: BenchLatencies) {}

  async transcribe(_pcm16k: Int16Array, signal: AbortSignal): Promise<string> {
    await delay(this.l.asrMs, undefined, { signal });
    return this.l.asrText;
  }

  describe(): string {
    return `bench ASR (${this.l.asrMs} ms, "${this.l.asrText}")`;
  }
}

export class FixedLlm implements LlmProvider {
  readonly name = 'bench-llm';
  constructor(private readonly l: BenchLatencies) {}

  async *reply(turn: LlmTurn): AsyncIterable<string> {
    await delay(this.l.llmMs, undefined, { signal: turn.signal });
    for (const delta of REPLY_DELTAS) yield delta;
  }

  describe(): string {
    return `bench LLM (${this.l.llmMs} ms to first token)`;
  }
}

export class FixedTts implements TtsProvider {
  readonly name = 'bench-tts';
  readonly sampleRate = 24_000;
  private readonly chunks: Int16Array[];

  constructor(private readonly l: BenchLatencies) {
    const pcm = voiceLikeTone(this.sampleRate, l.ttsSeconds);
    const size = Math.ceil(pcm.length / l.ttsChunks);
    this.chunks = [];
    for (let offset = 0; offset < pcm.length; offset += size)
      this.chunks.push(pcm.slice(offset, offset + size));
  }

  async *synthesize(_text: string, signal: AbortSignal): AsyncIterable<Int16Array> {
    await delay(this.l.ttsMs, undefined, { signal });
    for (const chunk of this.chunks) yield chunk;
  }

  describe(): string {
    return `bench TTS (${this.l.ttsMs} ms, ${this.l.ttsSeconds} s in ${this.l.ttsChunks} chunks at 24 kHz)`;
  }
}

export function benchProviders(l: BenchLatencies): VoiceProviders {
  return {
    asr: new FixedAsr(l),
    llm: new FixedLlm(l),
    tts: new FixedTts(l),
    createVad: () => SileroVad.create(),
  };
}

/** A harmonic tone with a syllable-rate envelope and a little noise: Opus codes it about as hard as speech. */
export function voiceLikeTone(rate: number, seconds: number): Int16Array {
  const out = new Int16Array(Math.round(rate * seconds));
  const random = seededRandom(7);
  for (let i = 0; i < out.length; i++) {
    const t = i / rate;
    const f0 = 140 + 25 * Math.sin(2 * Math.PI * 0.7 * t);
    let s = 0;
    for (let h = 1; h <= 6; h++) s += Math.sin(2 * Math.PI * f0 * h * t) / h;
    const envelope = 0.55 + 0.45 * Math.sin(2 * Math.PI * 4 * t);
    out[i] = Math.round(6000 * envelope * s + 300 * (random() - 0.5));
  }
  return out;
}

/** Deterministic noise, so every run streams the same bytes. */
export function seededRandom(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x1_0000_0000;
  };
}
