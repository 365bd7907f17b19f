// `deskbot robot --interactive` in a real pseudo-terminal (util-linux `script`): a typed line is spoken into the
// microphone and the reply printed; state and LED changes print as they happen, an animated ring only once;
// /leds shows the ring as coloured dots; /quit and Ctrl-D exit 0.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAi } from '../support/fake-openai.js';
import { post } from '../support/http.js';
import { type RobotChild, spawnRobot } from '../support/robot-cli.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let model: FakeOpenAi;
let t: TestVoice;
let stateDir: string;
const children: RobotChild[] = [];
// A coloured ring dot starts with a 24-bit ANSI foreground colour.
const TRUE_COLOR = '\x1b[38;2;';

beforeAll(async () => {
  model = await new FakeOpenAi().start();
  model.responder = () => ({ text: '😊 It is sunny.' });
  t = await startTestVoice({ LLM: { TwoTier: { url: model.url, model: 'fake-model' } } });
  stateDir = mkdtempSync(join(tmpdir(), 'deskbot-robot-pty-'));
}, 30_000);

afterAll(async () => {
  for (const robot of children) robot.child.kill('SIGKILL');
  await t.close();
  await model.close();
  rmSync(stateDir, { recursive: true, force: true });
});

async function startRobot(): Promise<RobotChild> {
  const robot = spawnRobot(['--interactive', '--ota', t.otaUrl, '--state-dir', stateDir], { pty: true });
  children.push(robot);
  await robot.waitFor(/MCP initialized by the server/);
  await robot.waitFor(/you> /);
  return robot;
}

describe('deskbot robot --interactive in a terminal', () => {
  it('speaks a typed line, prints the reply and the changes, shows the ring, and /quit exits 0', async () => {
    const robot = await startRobot();
    robot.type('what is the weather like today\r');
    await robot.waitFor(/robot heard: It is sunny\./, 15_000);
    const turn = robot.output();
    expect(turn).toContain('robot: chat listening');
    expect(turn).toContain('robot: chat speaking');
    // The listening pip (pixel 11, pure red) lit while the robot listened: printed as it happened.
    expect(turn).toMatch(/robot: leds .*listening 255,0,0/);

    let from = robot.output().length;
    robot.type('/leds\r');
    // The command's own line (the live ones start with "robot: ").
    const [ring] = await robot.waitFor(/(?<!robot: )leds [^\n]*listening \S+/, 5000, from);
    expect(ring).toContain(`${TRUE_COLOR}0;60;0m●`); // the talk arc, green, as dots
    expect(ring).toMatch(/arc \S+ · face \S+ · kid \S+ · smart \S+ · listening/);

    from = robot.output().length;
    robot.type('/last\r');
    await robot.waitFor(/reply: It is sunny\./, 5000, from);

    // Security flashes every 500 ms; the console says so once instead of printing each flash.
    from = robot.output().length;
    const id = (await eventually(() => t.voice.registry.list()[0])).deviceId;
    const set = await post(t.httpUrl, '/device/admin/set-state', { state: 'security', device_id: id });
    expect(set.status).toBe(200);
    await robot.waitFor(/robot: state \w+ → security/, 5000, from);
    await new Promise((resolve) => setTimeout(resolve, 1600)); // three flash half-periods
    const flashes = robot
      .output()
      .slice(from)
      .match(/robot: leds [^\n]*flashing 80,80,80 \(security\)/g);
    expect(flashes).toHaveLength(1);

    robot.type('/quit\r');
    expect(await robot.exit, robot.output()).toBe(0);
  }, 30_000);

  it('Ctrl-D exits 0, also right after a command', async () => {
    const robot = await startRobot();
    robot.type('/state\r\x04');
    expect(await robot.exit, robot.output()).toBe(0);
    expect(robot.output()).toMatch(/state \w+ · chat \w+ · face none/);
    expect(robot.output()).toMatch(/channel open · session [0-9a-f-]+/);
  }, 20_000);
});
