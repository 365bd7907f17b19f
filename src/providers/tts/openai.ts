// Any /v1/audio/speech endpoint, asking for raw PCM (24 kHz, 16-bit mono) so it streams without decoding.
import { type Endpoint, request } from '../openai-client.js';
import type { TtsProvider } from './types.js';

export interface OpenAiTtsOptions extends Endpoint {
  model: string;
  voice: string;
  timeoutSec: number;
}

export class OpenAiTts implements TtsProvider {
  readonly name = 'openai';
  readonly sampleRate = 24_000;

  constructor(private readonly options: OpenAiTtsOptions) {}

  describe(): string {
    return `openai-compatible speech (${this.options.model}/${this.options.voice} at ${this.options.url})`;
  }

  async *synthesize(text: string, signal: AbortSignal): AsyncIterable<Int16Array> {
    const ms = this.options.timeoutSec * 1000;
    const body = JSON.stringify({
      model: this.options.model,
      voice: this.options.voice,
      input: text,
      response_format: 'pcm',
    });
    const { response, controller } = await request(
      this.options,
      'audio/speech',
      { body, headers: { 'Content-Type': 'application/json' }, signal },
      { responseMs: ms, totalMs: ms },
    );
    try {
      let carry: Uint8Array = new Uint8Array(0);
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        const bytes = new Uint8Array(carry.length + chunk.length);
        bytes.set(carry);
        bytes.set(chunk, carry.length);
        const even = bytes.length & ~1;
        carry = bytes.slice(even);
        if (even > 0) yield new Int16Array(bytes.slice(0, even).buffer);
      }
    } finally {
      controller.abort();
    }
  }
}
