// CompatLLM: any chat-completions endpoint; streaming, stateless, no tools, no memory.
import { type Deadlines, type Endpoint, streamChat } from '../openai-client.js';
import type { LlmProvider, LlmTurn } from './types.js';

export interface CompatOptions extends Endpoint {
  model: string;
  maxTokens: number;
  temperature: number;
  timeoutSec: number;
}

export class CompatLlm implements LlmProvider {
  readonly name = 'CompatLLM';

  constructor(private readonly options: CompatOptions) {}

  describe(): string {
    return `CompatLLM ${this.options.model} at ${this.options.url}`;
  }

  async *reply(turn: LlmTurn): AsyncIterable<string> {
    const deadlines: Deadlines = {
      responseMs: this.options.timeoutSec * 1000,
      idleMs: Math.min(this.options.timeoutSec * 1000, 30_000),
      totalMs: this.options.timeoutSec * 1000,
    };
    const messages = [
      ...(turn.systemPrompt ? [{ role: 'system' as const, content: turn.systemPrompt }] : []),
      ...turn.history.filter((m) => m.role !== 'system'),
    ];
    const stream = streamChat(
      this.options,
      {
        model: this.options.model,
        messages,
        max_tokens: this.options.maxTokens,
        temperature: this.options.temperature,
      },
      deadlines,
      turn.signal,
    );
    for await (const chunk of stream) {
      if (chunk.type === 'text') yield chunk.text;
    }
  }
}
