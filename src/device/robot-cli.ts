// `deskbot robot`: the virtual robot from the command line. One-shot modes (--once, --say, --wav) boot, connect,
// do one thing and exit; otherwise the robot lives like the firmware: it keeps its identity in a state folder,
// prints what changes, goes idle when the server goes away and reconnects when it is back.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { isBinaryVersion } from '../protocol/index.js';
import { BootError } from './boot.js';
import { ChannelError } from './channel.js';
import { defaultStateDir, RobotSetupError, stableDeviceId } from './identity.js';
import { runInteractive } from './interactive.js';
import { ChannelKeeper } from './reconnect.js';
import { nextReply } from './reply.js';
import { VirtualRobot } from './robot.js';
import { RobotConsole, replyLine } from './robot-console.js';

export const ROBOT_OPTIONS = `      --ota URL                 boot endpoint (default http://localhost:8003/device/ota/)
      --state-dir DIR           the robot's flash and identity (default $DATA_DIR/robot, else ~/.deskbot/robot)
      --device-id MAC           default: a random locally administered MAC, made once and kept in the state dir
      --protocol-version N      binary framing 1, 2 or 3 (default 1, or what OTA says)
      --interactive             type sentences to say them; /state, /leds, /last, /help, /quit
      --once                    exit after the handshake and MCP discovery
      --say TEXT                say TEXT into the microphone (espeak-ng), print the reply, exit
      --wav FILE                send a 16-bit WAV file as microphone input, print the reply, exit
      --out FILE                with --say/--wav: save the reply audio the robot heard as WAV`;

export const ROBOT_USAGE = `Usage: deskbot robot [options]
Without --once/--say/--wav the robot keeps running: it prints state and LED changes, and when the server goes
away it goes idle and reconnects (after 1 s, doubling to 30 s). Ctrl-C (or /quit, Ctrl-D) exits.

${ROBOT_OPTIONS}`;

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;
/** One-shot modes wait this long for the reply to what they said. */
const REPLY_TIMEOUT_MS = 60_000;

type RobotFlags = ReturnType<typeof parseFlags>;

function parseFlags(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      ota: { type: 'string', default: 'http://localhost:8003/device/ota/' },
      'device-id': { type: 'string' },
      'protocol-version': { type: 'string' },
      'state-dir': { type: 'string' },
      interactive: { type: 'boolean', default: false },
      once: { type: 'boolean', default: false },
      say: { type: 'string' },
      wav: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }).values;
}

/** A usage mistake: what is wrong, or undefined. */
function checkFlags(values: RobotFlags): string | undefined {
  if (values['protocol-version'] !== undefined && !isBinaryVersion(Number(values['protocol-version'])))
    return '--protocol-version must be 1, 2 or 3';
  if (values['device-id'] !== undefined && !MAC.test(values['device-id']))
    return '--device-id must be a MAC address like 02:ab:cd:ef:01:23';
  const oneShots = [values.once, values.say !== undefined, values.wav !== undefined].filter(Boolean).length;
  if (oneShots > 1) return 'choose one of --once, --say and --wav';
  if (oneShots > 0 && values.interactive)
    return '--interactive cannot be combined with --once, --say or --wav';
  if (values.out !== undefined && values.say === undefined && values.wav === undefined)
    return '--out needs --say or --wav';
  return undefined;
}

/** Problems a user can fix (server down, refused, bad file): printed as one line, never a stack trace. */
function isOrdinary(error: unknown): error is Error {
  return (
    error instanceof BootError ||
    error instanceof ChannelError ||
    error instanceof RobotSetupError ||
    (error instanceof Error && typeof (error as NodeJS.ErrnoException).code === 'string')
  );
}

/** `untilStopped` resolves on Ctrl-C / SIGTERM (the program's one signal handling, shared with the services). */
export async function runRobot(argv: string[], untilStopped: () => Promise<void>): Promise<number> {
  let values: RobotFlags;
  try {
    values = parseFlags(argv);
  } catch (error) {
    console.error(`deskbot robot: ${(error as Error).message}\n\n${ROBOT_USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(ROBOT_USAGE);
    return 0;
  }
  const mistake = checkFlags(values);
  if (mistake) {
    console.error(`deskbot robot: ${mistake}\n\n${ROBOT_USAGE}`);
    return 2;
  }
  const oneShot = values.once || values.say !== undefined || values.wav !== undefined;
  let robot: VirtualRobot | undefined;
  try {
    const stateDir = values['state-dir'] ?? defaultStateDir();
    const deviceId = values['device-id'] ?? (await stableDeviceId(stateDir));
    const protocolVersion = Number(values['protocol-version'] ?? 1);
    robot = new VirtualRobot({
      otaUrl: values.ota,
      deviceId,
      stateDir,
      ...(isBinaryVersion(protocolVersion) ? { protocolVersion } : {}),
      retryBaseMs: 1000,
      // Long-running: one boot check per try, the reconnect loop does the waiting (and reports it).
      maxBootAttempts: oneShot ? 3 : 1,
      log: (message, fields) => {
        if (!oneShot && message === 'boot check failed') return; // the reconnect loop says it
        console.log(`robot: ${message}${fields ? ` ${JSON.stringify(fields)}` : ''}`);
      },
    });
    console.log(`robot ${robot.deviceId}: booting from ${values.ota} (state in ${stateDir})`);
    return oneShot
      ? await runOneShot(robot, values)
      : await runLongLived(robot, values.interactive, untilStopped);
  } catch (error) {
    if (!isOrdinary(error)) throw error;
    console.error(`deskbot robot: ${error.message}`);
    return 1;
  } finally {
    robot?.firmware.stop();
  }
}

async function runOneShot(robot: VirtualRobot, values: RobotFlags): Promise<number> {
  await robot.boot();
  console.log(
    `robot: firmware ${robot.firmwareVersion} on ${robot.partition}; websocket ${robot.ota?.websocket?.url}`,
  );
  await robot.connect();
  console.log(`robot: connected, session ${robot.sessionId}, binary protocol v${robot.protocolVersion}`);
  robot.on('frame', (frame) => {
    if (frame.type !== 'mcp') console.log(`robot <- ${JSON.stringify(frame)}`);
  });
  const discovered = await waitForDiscovery(robot, 10_000);
  console.log(
    discovered
      ? `robot: MCP initialized; vision endpoint ${robot.vision.url}`
      : 'robot: no MCP initialize yet',
  );
  if (values.once) {
    robot.disconnect();
    return discovered ? 0 : 1;
  }
  const reply = nextReply(robot, REPLY_TIMEOUT_MS);
  // A failed send (the channel closed under it) is reported by the reply's rejection instead.
  reply.done.catch(() => undefined);
  if (values.say !== undefined) await robot.say(values.say, { paced: true });
  else await robot.sendWav(await readFile(values.wav!), { paced: true });
  const { pcm, sentences } = await reply.done;
  console.log(replyLine(sentences, pcm.length, robot.downlinkSampleRate));
  if (values.out) {
    await robot.saveReplyWav(values.out, pcm);
    console.log(`robot: reply saved to ${values.out}`);
  }
  robot.disconnect();
  return 0;
}

async function runLongLived(
  robot: VirtualRobot,
  interactive: boolean,
  untilStopped: () => Promise<void>,
): Promise<number> {
  let print = (line: string) => console.log(line);
  const robotConsole = new RobotConsole(robot, {
    color: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR,
    print: (line) => print(line),
  });
  const keeper = new ChannelKeeper(robot, { report: (event) => robotConsole.keeperEvent(event) });
  keeper.start();
  await keeper.wake(); // the first try (its failure is reported, and retried in the background)
  let code = 0;
  if (interactive) {
    const session = runInteractive({
      robot,
      keeper,
      console: robotConsole,
      input: process.stdin,
      output: process.stdout,
      terminal: Boolean(process.stdin.isTTY && process.stdout.isTTY),
    });
    print = session.print;
    code = await session.done;
  } else {
    await untilStopped();
  }
  keeper.stop();
  robotConsole.stop();
  robot.disconnect();
  return code;
}

/** MCP discovery ends with the server's second tools/list; wait until the vision URL arrived and the lists settled. */
async function waitForDiscovery(robot: VirtualRobot, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let lastListAt = 0;
  robot.on('frame', (frame) => {
    if (frame.type === 'mcp' && frame.payload.method === 'tools/list') lastListAt = Date.now();
  });
  while (Date.now() < deadline) {
    if (robot.vision.url && lastListAt && Date.now() - lastListAt > 300) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return Boolean(robot.vision.url);
}
