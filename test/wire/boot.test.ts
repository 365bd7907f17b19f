// The virtual robot boots against the real server: OTA → WS → hello within 10 s → MCP initialize
// and the full paged tools/list, on each binary version.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BinaryVersion } from '../../src/protocol/index.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let t: TestVoice;
beforeEach(async () => {
  t = await startTestVoice();
});
afterEach(async () => {
  await t.close();
});

describe.each([1, 2, 3] as BinaryVersion[])('binary protocol v%i', (version) => {
  it('boots, says hello and gets MCP initialize plus every tools/list page', async () => {
    // A small page budget forces several pages, as a firmware with many tools would.
    const robot = t.robot({ protocolVersion: version, mcpPageBytes: 700 });
    const mcpMethods: string[] = [];
    robot.on('frame', (frame) => {
      if (frame.type === 'mcp' && typeof frame.payload.method === 'string')
        mcpMethods.push(frame.payload.method);
    });
    const ota = await robot.boot();
    expect(ota.websocket?.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/device\/v1\/$/);
    const started = Date.now();
    await robot.connect();
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(robot.sessionId).toMatch(/^[0-9a-f-]{36}$/);

    const hello = robot.frames.find((f) => f.frame.type === 'hello')?.frame;
    expect(hello).toMatchObject({
      type: 'hello',
      transport: 'websocket',
      audio_params: { format: 'opus', sample_rate: 24000, channels: 1, frame_duration: 60 },
    });

    const session = await eventually(() => {
      const s = t.voice.registry.get(robot.deviceId);
      return s && s.userTools.length > 0 ? s : undefined;
    });
    expect(session.info.binaryVersion).toBe(version);
    expect(robot.vision.url).toBe(`http://127.0.0.1:${t.voice.httpPort}/mcp/vision/explain`);
    expect(robot.vision.token).toBe(session.visionToken);
    expect(mcpMethods[0]).toBe('initialize');
    const pages = mcpMethods.filter((m) => m === 'tools/list').length;
    expect(pages).toBeGreaterThan(2);

    const regular = session.tools.map((tool) => tool.name);
    expect(regular).toContain('self.get_device_status');
    expect(regular).toContain('self.robot.set_state');
    expect(regular).not.toContain('self.reboot');
    expect(new Set(regular).size).toBe(regular.length);
    expect(session.userTools.map((tool) => tool.name)).toContain('self.reboot');

    // The server can call a tool and gets the device's answer back through the framing.
    const result = await session.mcp.callTool('self.robot.set_state', { state: 'sleep' });
    expect(result).toMatchObject({ isError: false });
    expect(robot.model.state).toBe('sleep');

    // Audio framing is accepted in this version (and not mistaken for a bad frame).
    robot.sendAudioPacket(new Uint8Array([0xf8, 0xff, 0xfe]));
    await eventually(() => session.stats.audioFrames === 1);
    expect(session.stats.rejectedFrames).toBe(0);
  });
});

describe('device registry and lifecycle', () => {
  it('lists connected devices and forgets them on a close and on a TCP drop', async () => {
    const a = t.robot();
    const b = t.robot();
    await a.start();
    await b.start();
    const list = async () =>
      (
        (await (await fetch(`${t.httpUrl}/device/admin/devices`)).json()) as {
          devices: Array<{ device_id: string }>;
        }
      ).devices
        .map((d) => d.device_id)
        .sort();
    expect(await list()).toEqual([a.deviceId, b.deviceId].sort());
    a.disconnect();
    b.dropConnection();
    await eventually(() => t.voice.registry.size === 0);
    expect(await list()).toEqual([]);
  });

  it('accepts audio before any listen and answers pings', async () => {
    const robot = t.robot();
    await robot.start();
    const session = await eventually(() => t.voice.registry.get(robot.deviceId));
    robot.sendAudioPacket(new Uint8Array([0xf8, 0xff, 0xfe]));
    await eventually(() => session.stats.audioFrames === 1);
    const socket = (robot as unknown as { socket: import('ws').WebSocket }).socket;
    const pong = new Promise<Buffer>((resolve) => socket.once('pong', resolve));
    socket.ping(Buffer.from('hi'));
    expect((await pong).toString()).toBe('hi');
  });

  it('a reconnecting device replaces its older connection', async () => {
    const first = t.robot({ deviceId: 'aa:bb:cc:00:00:01' });
    const second = t.robot({ deviceId: 'aa:bb:cc:00:00:01' });
    await first.start();
    const closed = new Promise<number>((resolve) => first.once('disconnected', resolve));
    await second.start();
    expect(await closed).toBe(4001);
    expect(t.voice.registry.get('aa:bb:cc:00:00:01')?.sessionId).toBe(second.sessionId);
  });

  it('closes a connection that never says hello', async () => {
    await t.close();
    t = await startTestVoice({ server: { hello_timeout_sec: 0.2 } });
    const ws = await import('ws');
    const socket = new ws.default(`ws://127.0.0.1:${t.voice.wsPort}/device/v1/`, {
      headers: { 'Device-Id': 'aa:bb:cc:dd:ee:01' },
    });
    const code = await new Promise<number>((resolve) => socket.on('close', resolve));
    expect(code).toBe(4000);
  });
});
