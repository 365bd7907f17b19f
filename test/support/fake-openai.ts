// A scripted OpenAI-compatible server: the stand-in for remote model endpoints that cannot exist here.
// Chat completions (streaming SSE or not), with scripted text, tool calls, delays, errors, stalls and
// malformed chunks; every request is recorded for assertions.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ChatScript {
  text?: string;
  toolCalls?: Array<{ name: string; arguments: Record<string, unknown> }>;
  /** Characters per streamed chunk. */
  chunkChars?: number;
  chunkDelayMs?: number;
  /** Delay before the response headers. */
  delayMs?: number;
  status?: number;
  /** Stop sending after this many chunks and keep the connection open. */
  stallAfterChunks?: number;
  malformed?: boolean;
}

export interface RecordedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
  at: number;
}

export class FakeOpenAi {
  readonly requests: RecordedRequest[] = [];
  private readonly scripts: ChatScript[] = [];
  private readonly open = new Set<ServerResponse>();
  responder: (body: any) => ChatScript = () => ({ text: '😊 Okay.' });
  transcription = 'hello there';
  private server: Server | undefined;
  url = '';

  /** Queues scripts answered in order; when the queue is empty, `responder` answers. */
  script(...scripts: ChatScript[]): this {
    this.scripts.push(...scripts);
    return this;
  }

  chatRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path.endsWith('/chat/completions'));
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.open) res.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    let body: any = raw;
    if (String(req.headers['content-type']).includes('json')) {
      try {
        body = JSON.parse(raw.toString());
      } catch {
        body = raw.toString();
      }
    }
    const path = (req.url ?? '').split('?')[0]!;
    this.requests.push({ path, headers: req.headers, body, at: Date.now() });
    this.open.add(res);
    res.on('close', () => this.open.delete(res));
    if (path.endsWith('/models')) {
      json(res, 200, { object: 'list', data: [{ id: 'fake-model', object: 'model' }] });
      return;
    }
    if (path.endsWith('/audio/transcriptions')) {
      json(res, 200, { text: this.transcription });
      return;
    }
    if (path.endsWith('/audio/speech')) {
      // Raw 24 kHz 16-bit PCM, as asked with response_format "pcm": a tone as long as the text is.
      const samples = Math.min(24_000 * 5, String(body?.input ?? '').length * 1200);
      const pcm = Buffer.alloc(samples * 2);
      for (let i = 0; i < samples; i++)
        pcm.writeInt16LE(Math.round(6000 * Math.sin((2 * Math.PI * 330 * i) / 24_000)), i * 2);
      res.writeHead(200, { 'content-type': 'audio/pcm' });
      res.write(pcm.subarray(0, 4801)); // odd split: the client must carry the half sample
      res.end(pcm.subarray(4801));
      return;
    }
    if (!path.endsWith('/chat/completions')) {
      json(res, 404, { error: { message: 'not found' } });
      return;
    }
    const script = this.scripts.shift() ?? this.responder(body);
    if (script.delayMs) await sleep(script.delayMs);
    if (script.status && script.status !== 200) {
      json(res, script.status, { error: { message: `scripted ${script.status}` } });
      return;
    }
    if (!body.stream) {
      json(res, 200, completion(script));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const text = script.text ?? '';
    const size = script.chunkChars ?? 4;
    const pieces: string[] = [];
    for (const char of Array.from(text)) {
      const last = pieces[pieces.length - 1];
      if (last !== undefined && Array.from(last).length < size) pieces[pieces.length - 1] = last + char;
      else pieces.push(char);
    }
    let sent = 0;
    for (const piece of pieces) {
      if (script.stallAfterChunks !== undefined && sent >= script.stallAfterChunks) return; // hold it open
      if (res.destroyed) return;
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: piece } }] })}\n\n`);
      sent++;
      if (script.chunkDelayMs) await sleep(script.chunkDelayMs);
    }
    if (script.stallAfterChunks !== undefined && sent >= script.stallAfterChunks) return;
    if (script.malformed) res.write('data: {"choices": [ this is not json\n\n');
    for (const [index, call] of (script.toolCalls ?? []).entries()) {
      const args = JSON.stringify(call.arguments);
      const delta = (part: object) =>
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [{ index, ...part }] } }] })}\n\n`;
      res.write(
        delta({ id: `call_${index}`, type: 'function', function: { name: call.name, arguments: '' } }),
      );
      res.write(delta({ function: { arguments: args.slice(0, Math.ceil(args.length / 2)) } }));
      res.write(delta({ function: { arguments: args.slice(Math.ceil(args.length / 2)) } }));
    }
    res.end('data: [DONE]\n\n');
  }
}

function completion(script: ChatScript) {
  return {
    id: 'chatcmpl-fake',
    object: 'chat.completion',
    choices: [
      {
        index: 0,
        finish_reason: script.toolCalls?.length ? 'tool_calls' : 'stop',
        message: {
          role: 'assistant',
          content: script.text ?? null,
          ...(script.toolCalls?.length
            ? {
                tool_calls: script.toolCalls.map((call, i) => ({
                  id: `call_${i}`,
                  type: 'function',
                  function: { name: call.name, arguments: JSON.stringify(call.arguments) },
                })),
              }
            : {}),
        },
      },
    ],
  };
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
