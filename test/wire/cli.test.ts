// The shipped command line: `deskbot start` brings the services up and `deskbot robot` connects to them.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/net.js';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'deskbot.js');
const children: ChildProcess[] = [];
const dirs: string[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function run(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 30_000,
  });
}

describe('deskbot CLI', () => {
  it('prints its version', () => {
    const result = run(['--version']);
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe('0.1.0');
  });

  it('refuses an unknown command with usage and exit 2', () => {
    const result = run(['fly']);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('unknown command "fly"');
  });

  it('stops with a clear message on a bad configuration value', () => {
    const result = run(['start'], { VOICE_WS_PORT: 'eighty' });
    expect(result.status).toBe(78);
    expect(result.stderr).toContain('VOICE_WS_PORT');
  });

  it('start brings the voice server up and the virtual robot connects to it', async () => {
    const [wsPort, httpPort] = [await freePort(), await freePort()];
    const dataDir = mkdtempSync(join(tmpdir(), 'deskbot-cli-'));
    dirs.push(dataDir);
    const env = {
      VOICE_WS_PORT: String(wsPort),
      VOICE_HTTP_PORT: String(httpPort),
      DATA_DIR: dataDir,
      BIND_HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    };
    const server = spawn(process.execPath, [BIN, 'start'], { env: { ...process.env, ...env } });
    children.push(server);
    let banner = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no banner; got: ${banner}`)), 20_000);
      server.stdout!.on('data', (chunk: Buffer) => {
        banner += chunk.toString();
        if (banner.includes('boot (OTA)')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    expect(banner).toContain(`ws://127.0.0.1:${wsPort}/device/v1/`);
    expect(banner).toContain(`http://127.0.0.1:${httpPort}/device/ota/`);

    // DATA_DIR keeps the robot's identity (DATA_DIR/robot) out of the home folder.
    const robot = spawn(
      process.execPath,
      [BIN, 'robot', '--once', '--ota', `http://127.0.0.1:${httpPort}/device/ota/`],
      {
        env: { ...process.env, DATA_DIR: dataDir },
      },
    );
    let out = '';
    robot.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => robot.on('exit', resolve));
    expect(out, out).toContain('connected, session');
    expect(out, out).toContain('MCP initialized');
    expect(code, out).toBe(0);

    server.kill('SIGTERM');
    const exit = await new Promise<number | null>((resolve) => server.on('exit', resolve));
    expect(exit).toBe(0);
  }, 60_000);
});
