// A scripted bridge for the voice server's tests (the real bridge is its own service): escalations with
// per-tool results and delays, the memory side channel, and the NDJSON message stream of the agent path.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface EscalationScript {
  result?: string;
  delayMs?: number;
  status?: number;
}

export type StreamLine =
  | { type: 'chunk' | 'final'; content: string }
  | { type: 'error'; message: string }
  | string;

export class FakeBridge {
  readonly requests: Array<{ path: string; body: any; at: number }> = [];
  escalations: Record<string, EscalationScript> = {};
  /** Lines of the next /api/message/stream replies, with an optional delay between lines. */
  streams: Array<{ lines: StreamLine[]; lineDelayMs?: number; status?: number }> = [];
  sideChannelDelayMs = 0;
  url = '';
  private server: Server | undefined;
  private readonly open = new Set<ServerResponse>();

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.open) res.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  posted(path: string): any[] {
    return this.requests.filter((r) => r.path === path).map((r) => r.body);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
    } catch {
      body = null;
    }
    const path = (req.url ?? '').split('?')[0]!;
    this.requests.push({ path, body, at: performance.now() });
    this.open.add(res);
    res.on('close', () => this.open.delete(res));
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (path === '/api/voice/escalate') {
      const script = this.escalations[body?.tool] ?? { result: `result of ${body?.tool}` };
      if (script.delayMs) await sleep(script.delayMs);
      if (res.destroyed) return;
      if (script.status && script.status !== 200)
        return json(script.status, { error: { code: 'x', message: 'scripted' } });
      return json(200, { result: script.result ?? '' });
    }
    if (path === '/api/voice/remember' || path === '/api/voice/memory_log') {
      if (this.sideChannelDelayMs) await sleep(this.sideChannelDelayMs);
      if (!res.destroyed) json(200, { ok: true });
      return;
    }
    if (path === '/api/message/stream') {
      const script = this.streams.shift() ?? { lines: [{ type: 'final', content: '😐 No script.' }] };
      if (script.status && script.status !== 200)
        return json(script.status, { error: { code: 'x', message: 'scripted' } });
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      for (const line of script.lines) {
        if (res.destroyed) return;
        res.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`);
        if (script.lineDelayMs) await sleep(script.lineDelayMs);
      }
      res.end();
      return;
    }
    json(404, { error: { code: 'not_found', message: path } });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
