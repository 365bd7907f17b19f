// The virtual robot lives like the firmware: one device id per state folder, and a long-running robot that outlives
// a server restart (idle while the server is away, then a new hello, MCP and a spoken turn on the new server).
// The robot is the shipped command (`deskbot robot`) as a child; the voice server runs in-process on fixed ports
// so it can be stopped and started again where the robot expects it.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAi } from '../support/fake-openai.js';
import { freePort } from '../support/net.js';
import { type RobotChild, spawnRobot } from '../support/robot-cli.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let model: FakeOpenAi;
let t: TestVoice;
let overrides: Record<string, unknown>;
const dirs: string[] = [];
const children: RobotChild[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'deskbot-robot-'));
  dirs.push(dir);
  return dir;
}

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: '😊 It is sunny.' });
  overrides = {
    LLM: { TwoTier: { url: model.url, model: 'fake-model' } },
    server: { ws_port: await freePort(), http_port: await freePort() },
  };
  t = await startTestVoice(overrides);
}, 30_000);

afterAll(async () => {
  for (const robot of children) robot.child.kill('SIGKILL');
  await t.close();
  await model.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('the virtual robot keeps one identity per state folder', () => {
  it('two runs with the same DATA_DIR (no --state-dir) are the same device; --device-id overrides', async () => {
    const dataDir = tempDir();
    const env = { DATA_DIR: dataDir };
    const first = spawnRobot(['--once', '--ota', t.otaUrl], { env });
    children.push(first);
    expect(await first.exit, first.output()).toBe(0);
    const id = first.output().match(/robot ([0-9a-f:]{17}): booting/)?.[1];
    expect(id, first.output()).toMatch(/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
    // Locally administered, unicast: bit 1 of the first byte set, bit 0 clear.
    expect(Number.parseInt(id!.slice(0, 2), 16) & 0b11).toBe(0b10);
    expect(readFileSync(join(dataDir, 'robot', 'device-id'), 'utf8').trim()).toBe(id);

    const second = spawnRobot(['--say', 'what is the weather like today', '--ota', t.otaUrl], { env });
    children.push(second);
    await second.waitFor(/robot heard: It is sunny\./, 15_000);
    expect(await second.exit, second.output()).toBe(0);
    expect(second.output()).toContain(`robot ${id}: booting`);

    const chosen = spawnRobot(['--once', '--device-id', '02:00:00:00:00:2A', '--ota', t.otaUrl], { env });
    children.push(chosen);
    expect(await chosen.exit, chosen.output()).toBe(0);
    expect(chosen.output()).toContain('robot 02:00:00:00:00:2a: booting');
    expect(readFileSync(join(dataDir, 'robot', 'device-id'), 'utf8').trim()).toBe(id);
  }, 30_000);
});

describe('a long-running robot and a server restart', () => {
  it('goes idle, reconnects with a new hello and MCP, and answers a question on the new server', async () => {
    const robot = spawnRobot(['--interactive', '--ota', t.otaUrl, '--state-dir', tempDir()]);
    children.push(robot);
    const [, id] = await robot.waitFor(/robot ([0-9a-f:]{17}): booting/);
    const [, firstSession] = await robot.waitFor(/connected to \S+, session ([0-9a-f-]+)/);
    await robot.waitFor(/MCP initialized by the server/);
    expect(t.voice.registry.get(id!)?.sessionId).toBe(firstSession);

    const before = robot.output().length;
    await t.close(); // the server goes away: every session is closed with 1001
    await robot.waitFor(/robot: disconnected \(1001\); idle, reconnecting in 1 s/, 5000, before);
    t = await startTestVoice(overrides); // same ports, a fresh server
    const [, secondSession] = await robot.waitFor(/connected to \S+, session ([0-9a-f-]+)/, 10_000, before);
    expect(secondSession).not.toBe(firstSession);
    await robot.waitFor(/MCP initialized by the server/, 5000, before);
    const session = await eventually(() => t.voice.registry.get(id!));
    expect(session.sessionId).toBe(secondSession);
    expect(session.deviceId).toBe(id);
    expect(robot.child.exitCode).toBeNull(); // it did not exit (it used to, with 13)

    const turnStart = robot.output().length;
    robot.type('what is the weather like today\n');
    await robot.waitFor(/server heard "[^"]*weather[^"]*"/, 15_000, turnStart);
    await robot.waitFor(/robot heard: It is sunny\./, 10_000, turnStart);
    expect(model.chatRequests().at(-1)!.body.messages.at(-1).content).toContain('weather');

    robot.type('/quit\n');
    expect(await robot.exit, robot.output()).toBe(0);
  }, 40_000);
});
