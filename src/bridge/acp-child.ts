// The agent child as an operating-system process: how it is spawned, what is kept of its stderr, how it and
// its descendants are stopped, and how long to wait before spawning the next one after a crash.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Logger } from '../util/log.js';

const KILL_GRACE_MS = 1500;
const STDERR_KEEP = 20;

export interface AgentCommand {
  /** argv of the agent; never empty (the client checks). */
  command: string[];
  /** The child's working directory when it exists. */
  cwd: string;
  /** Overlaid on process.env; an undefined value removes that variable. */
  env?: Record<string, string | undefined>;
}

/** Throws when the OS refuses the spawn outright (later failures arrive as 'error' / 'exit' events). */
export function spawnAgentChild({ command, cwd, env }: AgentCommand): ChildProcess {
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, {
    cwd: existsSync(cwd) ? cwd : process.cwd(),
    env: childEnv(env),
    stdio: ['pipe', 'pipe', 'pipe'],
    // Its own process group, so close() also reaches grandchildren (npx wrappers and the like).
    detached: process.platform !== 'win32',
  });
  child.stdin!.on('error', () => {}); // EPIPE after a crash; the exit/close paths handle it
  return child;
}

function childEnv(overlay: Record<string, string | undefined> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of Object.entries(overlay ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return env;
}

/** The last lines the agent wrote to stderr, so the "runtime down" log says in the agent's words why. */
export class StderrTail {
  private readonly lines: string[] = [];

  /** Logs every stderr line of `child` at debug level and keeps the last few. */
  follow(child: ChildProcess, log: Logger): void {
    let partial = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (data: string) => {
      const lines = (partial + data).split('\n');
      partial = lines.pop() ?? '';
      if (partial.length > 4000) partial = partial.slice(-4000);
      for (const raw of lines) {
        const line = raw.trimEnd().slice(0, 2000);
        if (!line) continue;
        this.lines.push(line);
        if (this.lines.length > STDERR_KEEP) this.lines.shift();
        log.debug({ pid: child.pid, line }, 'agent stderr');
      }
    });
  }

  reset(): void {
    this.lines.length = 0;
  }

  snapshot(): string[] {
    return this.lines.slice();
  }
}

/** Exponential backoff between respawns: baseMs doubling up to maxMs, back to baseMs once a child proved
 *  stable by staying up for resetAfterMs, so one crash a day never escalates to the maximum wait. */
export class RespawnBackoff {
  private failures = 0;
  private upSince = 0;

  constructor(private readonly config: { baseMs: number; maxMs: number; resetAfterMs: number }) {}

  /** The child finished initialize. */
  up(): void {
    this.upSince = Date.now();
  }

  /** The child went down; returns how long to wait before spawning the next one. */
  down(): number {
    const { baseMs, maxMs, resetAfterMs } = this.config;
    if (this.upSince > 0 && Date.now() - this.upSince >= resetAfterMs) this.failures = 0;
    this.upSince = 0;
    this.failures++;
    return Math.min(maxMs, baseMs * 2 ** (this.failures - 1));
  }
}

/** Closes stdin, sends SIGTERM to the child's process group, SIGKILL after a grace; resolves once it exited. */
export async function terminate(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || exited(child)) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  signalChild(child, 'SIGTERM');
  const timer = setTimeout(() => signalChild(child, 'SIGKILL'), KILL_GRACE_MS);
  await gone;
  clearTimeout(timer);
  // The group may hold grandchildren that outlive their parent; they get no grace.
  signalChild(child, 'SIGKILL');
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function signalChild(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    if (process.platform !== 'win32') process.kill(-child.pid, signal);
    else child.kill(signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}
