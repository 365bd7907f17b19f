// Any /v1/audio/transcriptions endpoint (whisper.cpp server, faster-whisper, a cloud API).
import { encodeWav } from '../../audio/wav.js';
import { type Endpoint, ProviderError, request } from '../openai-client.js';
import type { AsrProvider } from './types.js';

export interface OpenAiAsrOptions extends Endpoint {
  model: string;
  timeoutSec: number;
}

export class OpenAiAsr implements AsrProvider {
  readonly name = 'openai';

  constructor(private readonly options: OpenAiAsrOptions) {}

  describe(): string {
    return `openai-compatible transcription (${this.options.model} at ${this.options.url})`;
  }

  async transcribe(pcm16k: Int16Array, signal: AbortSignal): Promise<string> {
    const form = new FormData();
    form.append('file', new Blob([encodeWav(pcm16k, 16000)], { type: 'audio/wav' }), 'utterance.wav');
    form.append('model', this.options.model);
    form.append('response_format', 'json');
    const ms = this.options.timeoutSec * 1000;
    const { response, controller } = await request(
      this.options,
      'audio/transcriptions',
      { body: form, signal },
      { responseMs: ms, totalMs: ms },
    );
    try {
      const body = (await response.json()) as { text?: unknown };
      if (typeof body.text !== 'string')
        throw new ProviderError('malformed', 'transcription reply has no "text"');
      return body.text;
    } finally {
      controller.abort();
    }
  }
}
