// The dashboard's server-sent event hub: framing, heartbeat, client cap and the slow-client drop, on a fake
// response object and a hand-driven clock; then the perception routes on a real fastify app.
import { afterEach, describe, expect, it } from 'vitest';
import { createPerception, type Perception } from '../../src/bridge/perception/index.js';
import { registerPerceptionRoutes } from '../../src/bridge/perception/routes.js';
import { formatSseEvent, SseHub, type SseStream } from '../../src/bridge/perception/sse.js';
import { createHttpApp } from '../../src/util/http-app.js';
import { silentLogger } from '../../src/util/log.js';
import { ManualClock } from '../support/fake-clock.js';

/**
 * A response whose socket flushes at once (`fast`) or never (`stalled`): a stalled one keeps everything in
 * writableLength and answers write() with false, like a Node stream past its high-water mark.
 */
class FakeResponse implements SseStream {
  status = 0;
  headers: Record<string, string> = {};
  written: string[] = [];
  ended = false;
  destroyed = false;
  writableLength = 0;
  private readonly listeners: Record<string, Array<() => void>> = {};

  constructor(private readonly stalled = false) {}

  writeHead(status: number, headers: Record<string, string>): unknown {
    this.status = status;
    this.headers = headers;
    return this;
  }
  write(chunk: string): boolean {
    this.written.push(chunk);
    if (!this.stalled) return true;
    this.writableLength += Buffer.byteLength(chunk);
    return this.writableLength < 1024;
  }
  end(chunk?: string): unknown {
    if (chunk) this.written.push(chunk);
    this.ended = true;
    return this;
  }
  on(event: string, listener: () => void): unknown {
    const list = this.listeners[event] ?? [];
    list.push(listener);
    this.listeners[event] = list;
    return this;
  }
  destroy(): unknown {
    this.destroyed = true;
    this.emit('close');
    return this;
  }
  emit(event: string): void {
    for (const listener of this.listeners[event] ?? []) listener();
  }
  get body(): string {
    return this.written.join('');
  }
}

describe('SSE hub', () => {
  it('writes event-stream headers, a retry hint and frames as `event:`/`data:` blocks', () => {
    const clock = new ManualClock();
    const hub = new SseHub({ clock, welcome: () => [{ event: 'snapshot', data: { devices: [] } }] });
    const reply = {
      raw: new FakeResponse(),
      hijacked: false,
      hijack() {
        this.hijacked = true;
      },
    };
    expect(hub.attach(reply)).toBeTypeOf('function');
    expect(reply.hijacked).toBe(true);
    expect(reply.raw.status).toBe(200);
    expect(reply.raw.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(reply.raw.headers['cache-control']).toContain('no-cache');
    expect(hub.send('face_detected', { device_id: 'd1', data: {} })).toBe(1);
    expect(reply.raw.body).toBe(
      'retry: 3000\n\n' +
        'event: snapshot\ndata: {"devices":[]}\n\n' +
        'event: face_detected\ndata: {"device_id":"d1","data":{}}\n\n',
    );
    hub.close();
  });

  it('keeps a frame on its lines whatever the name or data hold', () => {
    expect(formatSseEvent('bad\nname', { text: 'two\nlines' })).toBe(
      'event: bad name\ndata: {"text":"two\\nlines"}\n\n',
    );
  });

  it('sends a heartbeat comment every 15 s, only while a client is attached', () => {
    const clock = new ManualClock();
    const hub = new SseHub({ clock });
    expect(clock.pendingTimers).toBe(0);
    const res = new FakeResponse();
    hub.attach(res);
    clock.advance(14_999);
    expect(res.body).not.toContain(': ping');
    clock.advance(1);
    expect(res.body.split(': ping\n\n')).toHaveLength(2);
    clock.advance(15_000);
    expect(res.body.split(': ping\n\n')).toHaveLength(3);
    res.emit('close'); // the browser went away
    expect(hub.clientCount).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });

  it('drops a client that stops reading instead of buffering for it; the others keep receiving', () => {
    const clock = new ManualClock();
    const hub = new SseHub({ clock, maxBufferedBytes: 4096 });
    const slow = new FakeResponse(true);
    const fast = new FakeResponse();
    hub.attach(slow);
    hub.attach(fast);
    const payload = { pad: 'x'.repeat(200) };
    for (let i = 0; i < 100; i++) hub.send('sound_event', { i, ...payload });
    expect(slow.destroyed).toBe(true);
    expect(slow.writableLength).toBeLessThanOrEqual(4096);
    expect(hub.stats()).toMatchObject({ clients: 1, droppedSlow: 1 });
    expect(fast.body.match(/event: sound_event/g)).toHaveLength(100);
    hub.close();
    expect(fast.ended).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });

  it('a client that catches up (drain) is kept', () => {
    const hub = new SseHub({ clock: new ManualClock(), maxBufferedBytes: 4096 });
    const res = new FakeResponse(true);
    hub.attach(res);
    for (let i = 0; i < 100; i++) {
      hub.send('tick', { i, pad: 'x'.repeat(200) });
      if (res.writableLength > 2048) {
        res.writableLength = 0;
        res.emit('drain');
      }
    }
    expect(res.destroyed).toBe(false);
    expect(res.body.match(/event: tick/g)).toHaveLength(100);
    hub.close();
  });

  it('refuses clients past the cap with 503 in the error shape', () => {
    const hub = new SseHub({ clock: new ManualClock(), maxClients: 2 });
    expect(hub.attach(new FakeResponse())).not.toBeNull();
    expect(hub.attach(new FakeResponse())).not.toBeNull();
    const third = new FakeResponse();
    expect(hub.attach(third)).toBeNull();
    expect(third.status).toBe(503);
    expect(JSON.parse(third.body)).toEqual({
      error: { code: 'too_many_clients', message: expect.any(String) },
    });
    expect(hub.stats()).toMatchObject({ clients: 2, refused: 1 });
    hub.close();
  });
});

describe('perception routes', () => {
  let perception: Perception | undefined;
  afterEach(() => perception?.stop());

  it('POST /api/perception/event updates the device snapshot and streams to the dashboard', async () => {
    const calls: string[] = [];
    perception = createPerception({
      voice: {
        inject: (id, text) => calls.push(`inject ${id} ${text}`),
        abort: () => undefined,
        setHeadAngles: (id, yaw) => calls.push(`head ${id} ${yaw}`),
        setFaceIdentified: () => undefined,
        playPurr: () => undefined,
      },
      consumers: { greeter: { hourStart: 0, hourEnd: 24, text: 'Hi!' } },
    });
    const app = createHttpApp({ logger: silentLogger });
    registerPerceptionRoutes(app, perception);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as { port: number };
    try {
      const stream = await fetch(`http://127.0.0.1:${port}/api/perception/stream`);
      expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const reader = stream.body!.getReader();
      const post = (body: unknown) =>
        app.inject({ method: 'POST', url: '/api/perception/event', payload: body as object });
      const ok = await post({
        name: 'sound_event',
        data: { direction: 'left', balance: -0.8, energy: 0.9 },
        device_id: 'dev-1',
        session_id: 's-1',
        ts: 1_700_000_000.25,
      });
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toEqual({ ok: true });
      const bad = await post({ name: '', device_id: 'dev-1' });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error.code).toBe('invalid_body');

      let text = '';
      const decoder = new TextDecoder();
      while (!text.includes('event: sound_event')) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value);
      }
      expect(text).toContain('event: snapshot\n');
      const frame = text.slice(text.indexOf('event: sound_event'));
      const data = JSON.parse(frame.split('\n')[1]!.slice('data: '.length));
      expect(data).toMatchObject({ name: 'sound_event', device_id: 'dev-1', ts: 1_700_000_000.25 });

      await perception.bus.idle();
      expect(calls).toEqual(['head dev-1 -45']);
      const devices = (await app.inject({ method: 'GET', url: '/api/perception/devices' })).json();
      expect(devices.devices[0]).toMatchObject({
        device_id: 'dev-1',
        session_id: 's-1',
        sound: { direction: 'left', balance: -0.8, energy: 0.9 },
      });
      await reader.cancel().catch(() => undefined);
    } finally {
      await app.close(); // must not hang on the open stream
    }
  });
});
