// A small client for OpenAI-compatible endpoints (chat completions with streaming and tool calls,
// transcriptions, speech). Every request has deadlines: for the response headers, between stream
// chunks (a stalled stream), and in total; each one ends the request with a ProviderError.

export class ProviderError extends Error {
  constructor(
    readonly code: 'timeout' | 'stalled' | 'http' | 'unreachable' | 'malformed' | 'aborted',
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

export interface Endpoint {
  /** Base URL including /v1, e.g. http://localhost:8080/v1 */
  url: string;
  apiKey?: string;
}

export interface Deadlines {
  /** Until the response headers arrive. */
  responseMs: number;
  /** Longest silence between stream chunks. */
  idleMs: number;
  /** Whole request. */
  totalMs: number;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

export type ChatChunk = { type: 'text'; text: string } | { type: 'tool_calls'; calls: ToolCall[] };

export function joinUrl(base: string, path: string): string {
  if (!path) return base;
  return `${base.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
}

/** fetch with the response deadline and the caller's signal; maps failures to ProviderError. */
export async function request(
  endpoint: Endpoint,
  path: string,
  init: {
    body: string | FormData | Uint8Array;
    headers?: Record<string, string>;
    signal?: AbortSignal | undefined;
  },
  deadlines: Pick<Deadlines, 'responseMs' | 'totalMs'>,
): Promise<{ response: Response; signal: AbortSignal; controller: AbortController }> {
  if (init.signal?.aborted) throw new ProviderError('aborted', 'aborted before the request was sent');
  const controller = new AbortController();
  const total = setTimeout(
    () => controller.abort(new ProviderError('timeout', `no complete answer within ${deadlines.totalMs} ms`)),
    deadlines.totalMs,
  );
  const onOuterAbort = () => controller.abort(new ProviderError('aborted', 'aborted'));
  init.signal?.addEventListener('abort', onOuterAbort, { once: true });
  controller.signal.addEventListener('abort', () => {
    clearTimeout(total);
    init.signal?.removeEventListener('abort', onOuterAbort);
  });
  const headerTimer = setTimeout(
    () => controller.abort(new ProviderError('timeout', `no response within ${deadlines.responseMs} ms`)),
    deadlines.responseMs,
  );
  try {
    const response = await fetch(joinUrl(endpoint.url, path), {
      method: 'POST',
      headers: {
        ...(endpoint.apiKey ? { Authorization: `Bearer ${endpoint.apiKey}` } : {}),
        ...init.headers,
      },
      body: init.body,
      signal: controller.signal,
    });
    clearTimeout(headerTimer);
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      controller.abort();
      throw new ProviderError(
        'http',
        `HTTP ${response.status} from ${endpoint.url}: ${text.slice(0, 200)}`,
        response.status,
      );
    }
    // The total deadline keeps running until the caller finishes reading; it must call controller.abort().
    return { response, signal: controller.signal, controller };
  } catch (error) {
    clearTimeout(headerTimer);
    controller.abort();
    throw toProviderError(error, controller.signal, endpoint.url);
  }
}

function toProviderError(error: unknown, signal: AbortSignal, url: string): ProviderError {
  if (error instanceof ProviderError) return error;
  if (signal.aborted && signal.reason instanceof ProviderError) return signal.reason;
  const cause = (error as { cause?: { code?: string } }).cause?.code;
  return new ProviderError(
    'unreachable',
    `cannot reach ${url}${cause ? ` (${cause})` : ''}: ${(error as Error).message}`,
  );
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  max_tokens?: number;
  temperature?: number;
  tools?: unknown[];
  tool_choice?: 'auto' | 'none';
}

/** Streams a chat completion: text deltas as they come, tool calls once complete (at the end). */
export async function* streamChat(
  endpoint: Endpoint,
  body: ChatRequest,
  deadlines: Deadlines,
  signal?: AbortSignal,
): AsyncGenerator<ChatChunk> {
  const {
    response,
    signal: requestSignal,
    controller,
  } = await request(
    endpoint,
    'chat/completions',
    {
      body: JSON.stringify({ ...body, stream: true }),
      headers: { 'Content-Type': 'application/json' },
      signal,
    },
    deadlines,
  );
  const calls = new Map<number, ToolCall>();
  try {
    for await (const data of readSse(response, deadlines.idleMs, requestSignal)) {
      if (data === '[DONE]') break;
      let parsed: {
        choices?: Array<{ delta?: { content?: string | null; tool_calls?: unknown[] } }>;
        error?: { message?: unknown } | string;
      };
      try {
        parsed = JSON.parse(data);
      } catch {
        throw new ProviderError(
          'malformed',
          `malformed stream chunk from ${endpoint.url}: ${data.slice(0, 80)}`,
        );
      }
      // Routers report an upstream failure after the 200 as an `error` chunk; ignoring it would end the
      // turn in silence.
      if (parsed.error) {
        const message = typeof parsed.error === 'string' ? parsed.error : String(parsed.error.message ?? '');
        throw new ProviderError('http', `error in the stream from ${endpoint.url}: ${message.slice(0, 200)}`);
      }
      const delta = parsed.choices?.[0]?.delta;
      if (delta?.content) yield { type: 'text', text: delta.content };
      for (const raw of delta?.tool_calls ?? []) mergeToolCall(calls, raw);
    }
  } catch (error) {
    throw toProviderError(error, requestSignal, endpoint.url);
  } finally {
    controller.abort();
  }
  if (calls.size > 0) yield { type: 'tool_calls', calls: [...calls.values()] };
}

function mergeToolCall(calls: Map<number, ToolCall>, raw: unknown): void {
  const part = raw as { index?: number; id?: string; function?: { name?: string; arguments?: string } };
  const index = part.index ?? calls.size;
  const call = calls.get(index) ?? {
    id: '',
    type: 'function' as const,
    function: { name: '', arguments: '' },
  };
  if (part.id) call.id = part.id;
  if (part.function?.name) call.function.name += part.function.name;
  if (part.function?.arguments) call.function.arguments += part.function.arguments;
  calls.set(index, call);
}

/** Far above any real chunk (a delta is a few tokens, a tool call's arguments a few KiB). */
const MAX_SSE_LINE_CHARS = 1 << 20;

/** Server-sent events: yields each `data:` payload; throws when the stream is silent for idleMs. */
async function* readSse(response: Response, idleMs: number, signal: AbortSignal): AsyncGenerator<string> {
  if (!response.body) throw new ProviderError('malformed', 'response has no body');
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      let idle: NodeJS.Timeout | undefined;
      const stalled = new Promise<never>((_, reject) => {
        idle = setTimeout(
          () => reject(new ProviderError('stalled', `stream silent for ${idleMs} ms`)),
          idleMs,
        );
      });
      let result: { done: boolean; value?: Uint8Array };
      try {
        result = await Promise.race([reader.read(), stalled]);
      } finally {
        clearTimeout(idle);
      }
      if (signal.aborted) throw signal.reason;
      if (result.done) break;
      buffer += decoder.decode(result.value, { stream: true });
      let newline = buffer.indexOf('\n');
      while (newline >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, '');
        buffer = buffer.slice(newline + 1);
        if (line.startsWith('data:')) yield line.slice(5).trimStart();
        newline = buffer.indexOf('\n');
      }
      // A stream that never ends its line would grow this buffer until the total deadline.
      if (buffer.length > MAX_SSE_LINE_CHARS)
        throw new ProviderError('malformed', `stream line longer than ${MAX_SSE_LINE_CHARS} characters`);
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}
