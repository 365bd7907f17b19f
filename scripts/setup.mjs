#!/usr/bin/env node
// Makes a fresh clone runnable: npm dependencies, Debian packages (as root), and the TypeScript build.
// Runs before `npm start`, `npm test` and `npm run bench`; each step is skipped when already done.
// Imports nothing outside Node itself, because it runs before node_modules exists.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const quiet = process.argv.includes('--quiet');
const say = (message) => {
  if (!quiet) console.log(`[setup] ${message}`);
};

/** Debian packages the project uses at run time (speech engines) and in tests (a browser). */
export const DEBIAN_PACKAGES = ['libespeak-ng1', 'espeak-ng-data', 'libpocketsphinx3', 'pocketsphinx-en-us'];
/** Only `npm test` needs these: the dashboard's browser test drives Debian's headless Chromium. */
export const TEST_DEBIAN_PACKAGES = ['chromium'];
const forTests = process.argv.includes('--for-tests');

function run(command, args, options = {}) {
  const result = spawnSync(command, args, {
    cwd: root,
    stdio: quiet ? ['ignore', 'ignore', 'inherit'] : 'inherit',
    ...options,
  });
  if (result.status !== 0) {
    console.error(`[setup] ${command} ${args.join(' ')} failed (exit ${result.status})`);
    process.exit(result.status ?? 1);
  }
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function newestIn(dir) {
  let newest = 0;
  if (!existsSync(dir)) return 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestIn(path) : mtime(path));
  }
  return newest;
}

// 1. npm dependencies
const installedMarker = join(root, 'node_modules', '.package-lock.json');
if (!existsSync(installedMarker) || mtime(join(root, 'package-lock.json')) > mtime(installedMarker)) {
  say('installing npm dependencies');
  // `npm install` follows package-lock.json; `npm ci` would refuse it here because the registry this machine
  // reaches does not serve every platform's optional binaries, so the lockfile cannot list them all.
  run('npm', ['install', '--no-audit', '--no-fund']);
}

// 2. Debian packages
const missing = [...DEBIAN_PACKAGES, ...(forTests ? TEST_DEBIAN_PACKAGES : [])].filter((name) => {
  const probe = spawnSync('dpkg-query', ['-W', `-f=$${'{'}Status}`, name], { encoding: 'utf8' });
  return !probe.stdout?.includes('install ok installed');
});
if (missing.length > 0) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (isRoot) {
    say(`installing Debian packages: ${missing.join(' ')}`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    run('apt-get', ['update', '-qq'], { env });
    run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env });
  } else {
    console.error(
      `[setup] missing Debian packages; install them with:\n  sudo apt-get install -y ${missing.join(' ')}`,
    );
    process.exit(1);
  }
}

// 3. TypeScript build
const stamp = join(root, 'dist', '.build-stamp');
const sources = Math.max(
  newestIn(join(root, 'src')),
  newestIn(join(root, 'bench')),
  mtime(join(root, 'tsconfig.json')),
  mtime(join(root, 'tsconfig.build.json')),
);
if (sources > mtime(stamp)) {
  say('building TypeScript');
  run(process.execPath, [
    join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
    '-p',
    'tsconfig.build.json',
  ]);
  writeFileSync(stamp, new Date().toISOString());
}
