// One interface for every language-model provider: a turn in, the spoken reply's text out as a stream.
import type { ChatMessage } from '../openai-client.js';

export interface LlmTurn {
  sessionId: string;
  deviceId: string;
  /** The dialogue so far, ending with the user's new message. */
  history: ChatMessage[];
  /** The voice server's top-level system prompt (providers may replace it with a persona). */
  systemPrompt: string;
  kidMode: boolean;
  signal: AbortSignal;
  /** Speak something now, before the answer (tool fillers). */
  say: (text: string) => void;
}

export interface LlmProvider {
  readonly name: string;
  /** Text deltas of the reply. Must end (or throw) within the provider's deadline. */
  reply(turn: LlmTurn): AsyncIterable<string>;
  /** Human-readable description for the startup banner. */
  describe(): string;
}
