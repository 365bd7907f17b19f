// `deskbot bridge` run from the TypeScript sources (`node --import tsx test/support/bridge-child.ts`): the
// real CLI path in a process of its own that a test can SIGKILL, without needing dist/ built first.
import { main } from '../../src/cli.js';

process.exitCode = await main(['bridge']);
