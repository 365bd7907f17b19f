// `deskbot robot --interactive`: a line typed is spoken into the robot's microphone (espeak-ng, in real time, as
// `--say` does); lines starting with "/" are commands. Lines are handled in order, one at a time, so a script
// piped in behaves as a person typing; end of input (Ctrl-D) waits for the last line, then exits 0.
import { createInterface } from 'node:readline';
import type { ChannelKeeper } from './reconnect.js';
import { nextReply } from './reply.js';
import type { VirtualRobot } from './robot.js';
import type { RobotConsole } from './robot-console.js';

export const HELP = [
  "type a sentence to say it into the robot's microphone; commands:",
  '  /state   robot state, chat status, channel, device',
  '  /leds    the LED ring now',
  '  /last    the last reply and what the server heard before it',
  '  /help    this list',
  '  /quit    exit (so does Ctrl-D)',
];

/** The longest wait for a reply to a spoken line. */
const REPLY_TIMEOUT_MS = 60_000;
/** Lines typed ahead of the one being spoken; more are refused (a paste of a whole file is not a conversation). */
const MAX_QUEUED_LINES = 20;

export interface InteractiveOptions {
  robot: VirtualRobot;
  keeper: ChannelKeeper;
  console: RobotConsole;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** A terminal: show a prompt and keep it below whatever the robot prints. */
  terminal: boolean;
}

/** Runs until /quit or end of input; resolves with the exit code. */
export function runInteractive(options: InteractiveOptions): {
  print: (line: string) => void;
  done: Promise<number>;
} {
  const { robot, keeper, output } = options;
  const rl = createInterface({ input: options.input, output, terminal: options.terminal, prompt: 'you> ' });
  let closed = false;
  rl.on('close', () => {
    closed = true;
  });
  // readline throws on a prompt after close (Ctrl-D can come while a line is still being handled).
  const prompt = (preserveCursor?: boolean) => {
    if (options.terminal && !closed) rl.prompt(preserveCursor);
  };
  const print = (line: string) => {
    if (!options.terminal || closed) {
      output.write(`${line}\n`);
      return;
    }
    // Write above the prompt and redraw it with what was typed so far.
    output.write(`\r\x1b[2K${line}\n`);
    prompt(true);
  };
  let queued = 0;
  let chain = Promise.resolve(false);
  let quit = false;

  const handle = async (line: string): Promise<boolean> => {
    const text = line.trim();
    if (text === '') return false;
    if (!text.startsWith('/')) {
      await speak(text);
      return false;
    }
    switch (text.split(/\s+/)[0]) {
      case '/quit':
      case '/exit':
        return true;
      case '/help':
        for (const helpLine of HELP) print(helpLine);
        return false;
      case '/state':
        for (const stateLine of options.console.state()) print(stateLine);
        return false;
      case '/leds':
        print(options.console.leds());
        return false;
      case '/last':
        for (const lastLine of options.console.last()) print(lastLine);
        return false;
      default:
        print(`unknown command ${text}; /help lists the commands`);
        return false;
    }
  };

  const speak = async (text: string): Promise<void> => {
    // Speaking to the robot is its wake word: a closed channel is opened first, as the firmware does.
    if (!(await keeper.wake())) {
      print('not connected to the server (reconnecting in the background); say it again later');
      return;
    }
    const reply = nextReply(robot, REPLY_TIMEOUT_MS);
    try {
      await robot.say(text, { paced: true });
      await reply.done; // the console prints the reply itself
    } catch (error) {
      print((error as Error).message);
    } finally {
      reply.cancel();
    }
  };

  const done = new Promise<number>((resolve) => {
    rl.on('line', (line) => {
      if (quit) return;
      if (queued >= MAX_QUEUED_LINES) {
        print(`too many lines waiting (${MAX_QUEUED_LINES}); dropped: ${line}`);
        return;
      }
      queued++;
      chain = chain.then(async (stop) => {
        if (stop) return true;
        const result = await handle(line).catch((error: Error) => {
          print(`error: ${error.message}`);
          return false;
        });
        queued--;
        if (result) {
          quit = true;
          rl.close();
        } else prompt();
        return result;
      });
    });
    // Ctrl-C at the prompt quits like /quit (readline would otherwise only pause).
    rl.on('SIGINT', () => rl.close());
    rl.on('close', () => void chain.then(() => resolve(0)));
  });
  print(HELP[0]!.replace('; commands:', ' (/help for commands)')); // (and shows the prompt)
  return { print, done };
}
