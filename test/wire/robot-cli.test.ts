// `deskbot robot` usage and failures: --help, bad flags (one line + usage, exit 2), and one-shot runs against a
// server that is not there (one clear line on stderr, exit 1, never a stack trace).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/net.js';
import { spawnRobot } from '../support/robot-cli.js';

const stateDir = mkdtempSync(join(tmpdir(), 'deskbot-robot-cli-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

/** Runs the robot command to its end; stdout and stderr apart. */
async function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const robot = spawnRobot([...args, '--state-dir', stateDir]);
  let stdout = '';
  let stderr = '';
  robot.child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  robot.child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await robot.exit;
  return { code, stdout, stderr };
}

const STACK_FRAME = /^\s+at .+\(.*:\d+:\d+\)$/m;

describe('deskbot robot usage', () => {
  it('--help prints the robot usage and exits 0', async () => {
    const { code, stdout } = await run(['--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Usage: deskbot robot \[options\]/);
    for (const flag of ['--interactive', '--state-dir', '--device-id', '--say', '--once'])
      expect(stdout).toContain(flag);
  });

  it.each([
    [['--fly'], "Unknown option '--fly'"],
    [['--protocol-version', '7'], '--protocol-version must be 1, 2 or 3'],
    [['--device-id', 'robot-1'], '--device-id must be a MAC address'],
    [['--say', 'hi', '--interactive'], '--interactive cannot be combined'],
  ])('%j: one line naming the mistake, then the usage, exit 2', async (args, message) => {
    const { code, stderr, stdout } = await run(args);
    expect(code).toBe(2);
    const [first, blank, usage] = stderr.split('\n');
    expect(first).toMatch(/^deskbot robot: /);
    expect(first).toContain(message);
    expect(blank).toBe('');
    expect(usage).toBe('Usage: deskbot robot [options]');
    expect(stdout).toBe('');
  });
});

describe('one-shot runs with the server away', () => {
  it('--say against a refused port: progress on stdout, one line on stderr, exit 1', async () => {
    const port = await freePort(); // nothing listens there
    const { code, stdout, stderr } = await run([
      '--say',
      'hello',
      '--ota',
      `http://127.0.0.1:${port}/device/ota/`,
    ]);
    expect(code).toBe(1);
    const lines = stderr.trimEnd().split('\n');
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toContain(
      `deskbot robot: boot check at http://127.0.0.1:${port}/device/ota/ failed 3 times`,
    );
    expect(lines[0]).toContain('ECONNREFUSED');
    expect(stdout).toMatch(/boot check failed .*"attempt":1/);
    expect(stdout + stderr).not.toMatch(STACK_FRAME);
  }, 15_000);
});
