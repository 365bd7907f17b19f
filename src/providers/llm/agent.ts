// AgentLLM (legacy): every turn goes to the bridge's streaming message endpoint, which prompts the agent
// runtime; sentences are spoken as NDJSON chunks arrive ({type:"chunk"|"final"|"error"}).
import { type Endpoint, ProviderError, request } from '../openai-client.js';
import type { LlmProvider, LlmTurn } from './types.js';

/** Spoken when the bridge refuses the turn for load (503 busy): short, honest, and different from a failure. */
export const AGENT_BUSY_REPLY = "😐 I'm a bit busy right now. Please ask me again in a moment.";

export interface AgentLlmOptions {
  /** Full URL of the streaming endpoint, e.g. http://localhost:8080/api/message/stream */
  url: string;
  channel: string;
  timeoutSec: number;
}

export class AgentLlm implements LlmProvider {
  readonly name = 'AgentLLM';

  constructor(private readonly options: AgentLlmOptions) {}

  describe(): string {
    return `AgentLLM via ${this.options.url} (channel ${this.options.channel})`;
  }

  async *reply(turn: LlmTurn): AsyncIterable<string> {
    const content = [...turn.history].reverse().find((m) => m.role === 'user')?.content ?? '';
    const ms = this.options.timeoutSec * 1000;
    const endpoint: Endpoint = { url: this.options.url };
    let opened: Awaited<ReturnType<typeof request>>;
    try {
      opened = await request(
        endpoint,
        '',
        {
          body: JSON.stringify({ content, channel: this.options.channel, session_id: turn.sessionId }),
          headers: { 'Content-Type': 'application/json' },
          signal: turn.signal,
        },
        { responseMs: ms, totalMs: ms },
      );
    } catch (error) {
      // Too many conversations at once: say so, rather than the generic apology for a broken model.
      if (error instanceof ProviderError && error.status === 503) {
        yield AGENT_BUSY_REPLY;
        return;
      }
      throw error;
    }
    const { response, controller } = opened;
    let yielded = false;
    try {
      for await (const line of ndjsonLines(response)) {
        const message = parseLine(line);
        if (message.type === 'chunk' && message.content) {
          yielded = true;
          yield message.content;
        } else if (message.type === 'final') {
          if (!yielded && message.content) yield message.content;
          return;
        } else if (message.type === 'error') {
          throw new ProviderError('http', `bridge reported: ${message.message ?? 'error'}`);
        }
      }
      if (!yielded) throw new ProviderError('malformed', 'the bridge stream ended without a reply');
    } finally {
      controller.abort();
    }
  }
}

function parseLine(line: string): { type?: string; content?: string; message?: string } {
  try {
    const value = JSON.parse(line) as unknown;
    if (typeof value === 'object' && value !== null) return value as { type?: string; content?: string };
  } catch {
    // fall through
  }
  throw new ProviderError('malformed', `malformed NDJSON line from the bridge: ${line.slice(0, 80)}`);
}

async function* ndjsonLines(response: Response): AsyncGenerator<string> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline = buffer.indexOf('\n');
    while (newline >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line) yield line;
      newline = buffer.indexOf('\n');
    }
  }
  if (buffer.trim()) yield buffer.trim();
}
