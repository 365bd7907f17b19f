// A real non-loopback peer for this machine: a network namespace joined to the host by a veth pair on a private
// /30 nobody else uses. Traffic stays between the host end and the namespace end (no route anywhere else).
// Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN); without it create() throws, so tests fail loudly instead of skipping.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { CidrList, isCidr } from '../../src/util/cidr.js';

const run = promisify(execFile);

export interface CurlReply {
  status: number;
  text: string;
  json: any;
}

export interface CurlOptions {
  method?: string;
  headers?: Record<string, string>;
  /** Sent as is, with content-type application/json unless a header says otherwise. */
  body?: string;
}

export interface Netns {
  readonly name: string;
  /** Address of the host end: what the namespace connects to. */
  readonly hostAddress: string;
  /** Address of the namespace end: the peer address the servers see. */
  readonly peerAddress: string;
  /** curl from inside the namespace. The path is sent exactly as given (`--path-as-is`). */
  curl(url: string, options?: CurlOptions): Promise<CurlReply>;
  /** Removes the namespace and the veth pair; safe to call twice. */
  destroy(): void;
}

async function ip(...args: string[]): Promise<string> {
  const { stdout } = await run('ip', args, { timeout: 10_000 });
  return stdout;
}

function quietly(...args: string[]): void {
  try {
    execFileSync('ip', args, { stdio: 'ignore', timeout: 10_000 });
  } catch {
    // Already gone: exactly what cleanup wants.
  }
}

/**
 * A 10.213.x.0/30 that overlaps no interface address and no route here except the default (0.0.0.0/0), so the
 * /30 we add cannot shadow a real network.
 */
async function freeSubnet(): Promise<number> {
  const text = `${await ip('-4', 'addr')}\n${await ip('-4', 'route', 'show', 'table', 'all')}`;
  const existing = [...text.matchAll(/\b(\d{1,3}(?:\.\d{1,3}){3})(?:\/(\d{1,2}))?\b/g)]
    .map(([, address, prefix]) => `${address}/${prefix ?? '32'}`)
    .filter((cidr) => !cidr.endsWith('/0') && isCidr(cidr));
  const taken = new CidrList(existing);
  const candidates = Array.from({ length: 256 }, (_, x) => x).sort(() => Math.random() - 0.5);
  for (const x of candidates) {
    const ours = new CidrList([`10.213.${x}.0/30`]);
    const clash =
      [0, 1, 2, 3].some((host) => taken.contains(`10.213.${x}.${host}`)) ||
      existing.some((cidr) => ours.contains(cidr.split('/')[0]));
    if (!clash) return x;
  }
  throw new Error('no free 10.213.x.0/30 on this machine');
}

const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** Namespaces and host ends a killed earlier run left behind (its pid is gone); ours only, by name. */
async function sweepStale(): Promise<void> {
  for (const [, name, pid] of (await ip('netns', 'list')).matchAll(/^(deskbot-[\w-]+-(\d+))\b/gm)) {
    if (!alive(Number(pid))) quietly('netns', 'del', name!);
  }
  for (const [, link, pid] of (await ip('-o', 'link', 'show')).matchAll(/^\d+: (db\d+h(\d+))@/gm)) {
    if (!alive(Number(pid))) quietly('link', 'del', link!);
  }
}

let created = 0;

/**
 * Creates namespace `deskbot-<tag>-<n>-<pid>` with veth `db<n>h<pid>` (host) / `db<n>n<pid>` (namespace).
 * Leftovers of the same names, and of killed earlier runs, are deleted first. Fails with a clear message when
 * not root or without `ip netns`.
 */
export async function createNetns(tag: string): Promise<Netns> {
  if (process.getuid?.() !== 0) {
    throw new Error(`netns tests need root (ip netns / veth); running as uid ${process.getuid?.()}`);
  }
  try {
    await ip('netns', 'list');
  } catch (error) {
    throw new Error(`"ip netns" is unavailable here (${(error as Error).message.trim()}); install iproute2`);
  }
  await sweepStale();
  const n = created++;
  const name = `deskbot-${tag}-${n}-${process.pid}`;
  // Interface names are at most 15 characters: "db" + n + "h" + a pid of at most 7 digits.
  const hostIf = `db${n}h${process.pid}`;
  const nsIf = `db${n}n${process.pid}`;
  const destroy = () => {
    quietly('netns', 'del', name);
    quietly('link', 'del', hostIf); // normally gone with the namespace's end of the pair
  };
  destroy();
  // A crash between here and afterAll must not leave the namespace behind.
  process.once('exit', destroy);
  try {
    const x = await freeSubnet();
    const hostAddress = `10.213.${x}.1`;
    const peerAddress = `10.213.${x}.2`;
    await ip('netns', 'add', name);
    await ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
    await ip('link', 'set', nsIf, 'netns', name);
    await ip('addr', 'add', `${hostAddress}/30`, 'dev', hostIf);
    await ip('link', 'set', hostIf, 'up');
    await ip('netns', 'exec', name, 'ip', 'addr', 'add', `${peerAddress}/30`, 'dev', nsIf);
    await ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'up');
    await ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
    return {
      name,
      hostAddress,
      peerAddress,
      curl: (url, options) => curlFrom(name, hostAddress, url, options),
      destroy,
    };
  } catch (error) {
    destroy();
    throw new Error(`could not set up network namespace ${name}: ${(error as Error).message}`);
  }
}

async function curlFrom(
  ns: string,
  hostAddress: string,
  url: string,
  options: CurlOptions = {},
): Promise<CurlReply> {
  // Only the host end of our own veth pair is ever a target.
  if (new URL(url).hostname !== hostAddress) throw new Error(`refusing to curl ${url}: not ${hostAddress}`);
  const headers = {
    ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...options.headers,
  };
  const args = [
    'netns',
    'exec',
    ns,
    'curl',
    '-s',
    '-m',
    '5',
    '--path-as-is',
    '-o',
    '-',
    '-w',
    '\n%{http_code}',
  ];
  args.push('-X', options.method ?? (options.body !== undefined ? 'POST' : 'GET'));
  for (const [header, value] of Object.entries(headers)) args.push('-H', `${header}: ${value}`);
  if (options.body !== undefined) args.push('--data-binary', options.body);
  args.push(url);
  const { stdout } = await run('ip', args, { timeout: 15_000 }).catch(
    (error: { stdout?: string; message: string }) => {
      // curl exits non-zero on a network failure: status 000, which the caller's assertion reports.
      return { stdout: error.stdout ?? `\n000 (${error.message})` };
    },
  );
  const cut = stdout.lastIndexOf('\n');
  const text = stdout.slice(0, cut);
  const status = Number(stdout.slice(cut + 1).slice(0, 3));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, text, json };
}
