#!/usr/bin/env node
// Entry point of the `deskbot` command. Builds on first use so a fresh clone works with npx too.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const cli = new URL('../dist/src/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(cli))) {
  const setup = spawnSync(process.execPath, ['scripts/setup.mjs', '--quiet'], { cwd: root, stdio: 'inherit' });
  if (setup.status !== 0) process.exit(setup.status ?? 1);
}
const { main } = await import(cli.href);
process.exitCode = await main(process.argv.slice(2));
