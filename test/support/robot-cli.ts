// Runs `deskbot robot` as a child process (the shipped bin, over pipes or a real pseudo-terminal) and reads what
// it prints as it comes.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

export const BIN = join(import.meta.dirname, '..', '..', 'bin', 'deskbot.js');

export interface RobotChild {
  readonly child: ChildProcess;
  /** Everything printed so far (stdout and stderr interleaved as they arrived). */
  output(): string;
  /** Resolves with the first match of `pattern` in the output from `from` on; fails after timeoutMs. */
  waitFor(pattern: RegExp, timeoutMs?: number, from?: number): Promise<RegExpMatchArray>;
  type(text: string): void;
  exit: Promise<number | null>;
}

export interface RobotChildOptions {
  env?: Record<string, string>;
  /** Run inside a pseudo-terminal (util-linux `script`): stdin and stdout are a TTY for the robot. */
  pty?: boolean;
}

function shellQuote(arg: string): string {
  return `'${arg.replaceAll("'", "'\\''")}'`;
}

export function spawnRobot(args: string[], options: RobotChildOptions = {}): RobotChild {
  const command = [process.execPath, BIN, 'robot', ...args];
  const env = { ...process.env, LOG_LEVEL: 'warn', ...options.env };
  // `script -qfec CMD /dev/null`: quiet, flush on every write, exit with the command's code, no log file.
  const child = options.pty
    ? spawn('script', ['-qfec', command.map(shellQuote).join(' '), '/dev/null'], { env })
    : spawn(command[0]!, command.slice(1), { env });
  let out = '';
  const listeners = new Set<() => void>();
  const collect = (chunk: Buffer) => {
    out += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    exit,
    output: () => out,
    type: (text) => child.stdin!.write(text),
    waitFor(pattern, timeoutMs = 10_000, from = 0) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = out.slice(from).match(pattern);
          if (!match) return;
          done();
          resolve(match);
        };
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no ${pattern} within ${timeoutMs} ms; output so far:\n${out}`));
        }, timeoutMs);
        listeners.add(check);
        void exit.then(() => {
          if (!listeners.has(check)) return;
          done();
          reject(new Error(`exited before ${pattern}; output:\n${out}`));
        });
        check();
      });
    },
  };
}
