// Socket floods against the server's shipped limits (issue 13): with the server process held to `nofile`
// descriptors, `sockets` idle, slowloris or trickling connections are opened, and while they are held a
// fresh client (another address) is timed to an OTA 200 and a WebSocket server hello. Printed, never asserted.
//
// Each scenario gets a fresh server child with the default limits (BENCH_DEFAULT_LIMITS=1), its descriptor
// limit lowered with `prlimit --pid` once it is listening (node raises its soft limit to the hard one at
// startup, so it has to come after). The floods come from 127.0.0.1, or spread over 16 addresses
// 127.0.1.1–16 (under the per-address cap, so only the totals bound them); the fresh client from 127.0.0.9.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import WebSocket from 'ws';
import { ServerChild } from './ipc.js';
import { DEFAULT_LATENCIES } from './providers.js';
import { summarize } from './stats.js';

export interface SocketsOptions {
  /** Connections in each flood. */
  sockets: number;
  /** Descriptor limit (soft and hard) of the server process. */
  nofile: number;
}

type Kind = 'ws-idle' | 'ws-nohello' | 'http-slowloris' | 'http-trickle';

const KINDS: { kind: Kind; what: string }[] = [
  { kind: 'ws-idle', what: ':8000 TCP connect, never a byte' },
  { kind: 'ws-nohello', what: ':8000 upgraded (101), never a hello' },
  { kind: 'http-slowloris', what: ':8003 GET, one header line every 2 s, never the blank line' },
  { kind: 'http-trickle', what: ':8003 POST /device/ota/ Content-Length 100000, one body byte a second' },
];
const SPREADS = [1, 16];
/** Seconds after the flood starts: shed counts, and when the fresh client is timed. */
const CHECKPOINTS_S = [1, 5, 15];
const PROBES_AT_S = [1.5, 3.5, 6.5, 9.5, 12.5];
const HOLD_S = 15.2;
const PROBE_ADDRESS = '127.0.0.9';
const PROBE_TIMEOUT_MS = 5000;

interface Flooder {
  socket: Socket;
  connected: boolean;
  /** First status line's code from the server (101, 408, 503, …). */
  status?: string;
  /** ms since the flood started; set when the server (or the kernel) ended the connection. */
  closedAt?: number;
  error?: string;
  sent: number;
}

interface Probe {
  at: number;
  otaMs?: number;
  otaError?: string;
  wsMs?: number;
  wsError?: string;
}

interface Row {
  kind: Kind;
  addresses: number;
  opened: number;
  connectFailed: number;
  openMs: number;
  limit: string;
  fdsBefore: number;
  fdsPeak: number;
  fdsEnd: number;
  rssBefore: number;
  rssPeak: number;
  rssEnd: number;
  shed: number[];
  outcomes: string;
  baseline: Probe;
  probes: Probe[];
  crashed?: string;
}

export async function runSockets(options: SocketsOptions): Promise<void> {
  console.log(
    `\n== sockets: ${options.sockets} hostile connections per scenario, server limited to ${options.nofile} ` +
      'descriptors, default limits ==',
  );
  for (const { kind, what } of KINDS) console.log(`  ${kind.padEnd(15)} ${what}`);
  console.log(
    `  fresh client from ${PROBE_ADDRESS} at ${PROBES_AT_S.join(', ')} s: OTA POST → 200, then WebSocket → server hello`,
  );
  const rows: Row[] = [];
  for (const { kind } of KINDS) {
    for (const addresses of SPREADS) {
      const row = await scenario(kind, addresses, options);
      rows.push(row);
      printRow(row);
    }
  }
  printTable(rows, options);
}

async function scenario(kind: Kind, addresses: number, options: SocketsOptions): Promise<Row> {
  process.env.BENCH_DEFAULT_LIMITS = '1';
  const server = await ServerChild.start(DEFAULT_LATENCIES).finally(() => {
    delete process.env.BENCH_DEFAULT_LIMITS;
  });
  const flooders: Flooder[] = [];
  let ticker: NodeJS.Timeout | undefined;
  try {
    execFileSync('prlimit', ['--pid', String(server.pid), `--nofile=${options.nofile}:${options.nofile}`]);
    const limit = childLimit(server.pid);
    const before = await server.resources();
    const baseline = await probe(server, 0);

    const port = kind.startsWith('ws') ? server.wsPort : server.httpPort;
    const start = performance.now();
    const since = () => performance.now() - start;
    // Batches of 100, each awaited: the listen backlog (511) is not what is measured here.
    for (let i = 0; i < options.sockets; i += 100) {
      const batch: Promise<void>[] = [];
      for (let j = i; j < Math.min(options.sockets, i + 100); j++) {
        const localAddress = addresses === 1 ? '127.0.0.1' : `127.0.1.${(j % addresses) + 1}`;
        batch.push(open(kind, port, localAddress, flooders, since));
      }
      await Promise.all(batch);
    }
    const openMs = since();
    // One timer drives every slow sender: a header line every 2 s, a body byte every second.
    let tick = 0;
    ticker = setInterval(() => {
      tick++;
      for (const f of flooders) {
        if (f.closedAt !== undefined || !f.connected) continue;
        if (kind === 'http-slowloris' && tick % 2 === 0) write(f, `X-Pad-${f.sent}: ${'x'.repeat(8)}\r\n`);
        if (kind === 'http-trickle') write(f, 'a');
      }
    }, 1000);

    const shed: number[] = [];
    const probes: Probe[] = [];
    let fdsPeak = -1;
    let rssPeak = 0;
    const events: { at: number; run: () => Promise<void> }[] = [
      ...CHECKPOINTS_S.map((s) => ({
        at: s * 1000,
        run: async () => {
          shed.push(flooders.filter((f) => f.closedAt !== undefined && f.closedAt <= s * 1000).length);
        },
      })),
      ...PROBES_AT_S.map((s) => ({
        at: s * 1000,
        run: async () => {
          probes.push(await probe(server, since()));
        },
      })),
      {
        // Descriptors and memory while the flood is held (forced GCs inside: kept apart from the probes).
        at: 2500,
        run: async () => {
          const r = await server.resources();
          fdsPeak = r.fds;
          rssPeak = r.memory.rss;
        },
      },
    ].sort((a, b) => a.at - b.at);
    for (const event of events) {
      const wait = event.at - since();
      if (wait > 0) await sleep(wait);
      await event.run();
    }
    const rest = HOLD_S * 1000 - since();
    if (rest > 0) await sleep(rest);
    const end = await server.resources();
    const peakSample = await server.sample();
    rssPeak = Math.max(rssPeak, peakSample.memory.rss);

    const outcomes = new Map<string, number>();
    for (const f of flooders) {
      const key = !f.connected
        ? `connect ${f.error ?? 'failed'}`
        : f.closedAt === undefined
          ? `held${f.status ? ` (${f.status})` : ''}`
          : `closed${f.status ? ` after ${f.status}` : ' silently'}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    }
    return {
      kind,
      addresses,
      opened: flooders.filter((f) => f.connected).length,
      connectFailed: flooders.filter((f) => !f.connected).length,
      openMs,
      limit,
      fdsBefore: before.fds,
      fdsPeak,
      fdsEnd: end.fds,
      rssBefore: before.memory.rss,
      rssPeak,
      rssEnd: end.memory.rss,
      shed,
      outcomes: [...outcomes].map(([k, n]) => `${k} ${n}`).join(', '),
      baseline,
      probes,
    };
  } catch (error) {
    return {
      kind,
      addresses,
      opened: flooders.filter((f) => f.connected).length,
      connectFailed: flooders.filter((f) => !f.connected).length,
      openMs: 0,
      limit: '?',
      fdsBefore: -1,
      fdsPeak: -1,
      fdsEnd: -1,
      rssBefore: 0,
      rssPeak: 0,
      rssEnd: 0,
      shed: [],
      outcomes: '',
      baseline: { at: 0 },
      probes: [],
      crashed: String((error as Error).message ?? error),
    };
  } finally {
    if (ticker) clearInterval(ticker);
    for (const f of flooders) f.socket.destroy();
    await server.stop().catch(() => undefined);
  }
}

function open(
  kind: Kind,
  port: number,
  localAddress: string,
  flooders: Flooder[],
  since: () => number,
): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    const f: Flooder = { socket, connected: false, sent: 0 };
    // Unique per connection: a second session of one Device-Id replaces (closes) the first.
    const device = mac(flooders.push(f));
    const timer = setTimeout(() => {
      f.error ??= 'timeout';
      resolve();
    }, 3000);
    socket.setNoDelay(true);
    socket.on('connect', () => {
      f.connected = true;
      clearTimeout(timer);
      if (kind === 'ws-nohello') {
        write(
          f,
          'GET /device/v1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            `Sec-WebSocket-Key: ${Buffer.from(randomUUID().slice(0, 16)).toString('base64')}\r\n` +
            `Sec-WebSocket-Version: 13\r\nDevice-Id: ${device}\r\nClient-Id: ${randomUUID()}\r\n` +
            'Protocol-Version: 1\r\n\r\n',
        );
      }
      if (kind === 'http-slowloris') write(f, 'GET /device/ota/ HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      if (kind === 'http-trickle') {
        write(
          f,
          'POST /device/ota/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
            `Device-Id: ${device}\r\nContent-Length: 100000\r\n\r\n{`,
        );
      }
      resolve();
    });
    socket.on('data', (data) => {
      if (f.status !== undefined) return;
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(data.toString('latin1', 0, 16));
      f.status = match?.[1] ?? 'non-HTTP bytes';
    });
    socket.on('error', (error) => {
      f.error ??= (error as NodeJS.ErrnoException).code ?? error.message;
    });
    socket.on('close', () => {
      f.closedAt ??= since();
      clearTimeout(timer);
      resolve();
    });
  });
}

function write(f: Flooder, text: string): void {
  f.sent++;
  f.socket.write(text);
}

/** A fresh client: OTA POST → 200, then a WebSocket → the server's hello. Each timed alone. */
async function probe(server: ServerChild, at: number): Promise<Probe> {
  const result: Probe = { at };
  const device = mac(100_000 + Math.floor(Math.random() * 100_000));
  const otaStart = performance.now();
  try {
    const status = await ota(server.httpPort, device);
    if (status === 200) result.otaMs = performance.now() - otaStart;
    else result.otaError = `HTTP ${status}`;
  } catch (error) {
    result.otaError = (error as Error).message;
  }
  const wsStart = performance.now();
  try {
    await wsHello(server.wsPort, device);
    result.wsMs = performance.now() - wsStart;
  } catch (error) {
    result.wsError = (error as Error).message;
  }
  return result;
}

function ota(port: number, device: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ application: { version: '1.0.0' } });
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/device/ota/',
        method: 'POST',
        localAddress: PROBE_ADDRESS,
        agent: false,
        timeout: PROBE_TIMEOUT_MS,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
          'Device-Id': device,
          'Client-Id': randomUUID(),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${PROBE_TIMEOUT_MS} ms`)));
    req.on('error', (error) => reject(new Error((error as NodeJS.ErrnoException).code ?? error.message)));
    req.end(body);
  });
}

function wsHello(port: number, device: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/device/v1/`, {
      headers: { 'Protocol-Version': '1', 'Device-Id': device, 'Client-Id': randomUUID() },
      perMessageDeflate: false,
      handshakeTimeout: PROBE_TIMEOUT_MS,
      localAddress: PROBE_ADDRESS,
    });
    const done = (error?: Error) => {
      clearTimeout(timer);
      ws.removeAllListeners('message');
      ws.terminate();
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(() => done(new Error(`no hello in ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
    ws.on('error', (error) => done(new Error((error as NodeJS.ErrnoException).code ?? error.message)));
    ws.on('unexpected-response', (_req, res) => done(new Error(`upgrade refused: HTTP ${res.statusCode}`)));
    ws.on('close', (code) => done(new Error(`closed (${code}) before hello`)));
    ws.on('open', () =>
      ws.send(
        JSON.stringify({
          type: 'hello',
          version: 1,
          features: { mcp: false, aec: false },
          transport: 'websocket',
          audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
        }),
      ),
    );
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      try {
        if ((JSON.parse(data.toString()) as { type?: unknown }).type === 'hello') done();
      } catch {
        // not JSON: not the hello
      }
    });
  });
}

function childLimit(pid: number): string {
  try {
    const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    return line?.slice('Max open files'.length).trim().split(/\s+/).slice(0, 2).join('/') ?? '?';
  } catch {
    return '?';
  }
}

function mac(n: number): string {
  const bytes = [0x02, 0xbe, (n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255];
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
const ms = (value: number | undefined) => (value === undefined ? '—' : value.toFixed(0));

function served(p: Probe): number | undefined {
  return p.otaMs !== undefined && p.wsMs !== undefined ? p.otaMs + p.wsMs : undefined;
}

function printRow(row: Row): void {
  const label = `${row.kind} × ${row.addresses === 1 ? '1 address' : `${row.addresses} addresses`}`;
  if (row.crashed) {
    console.log(`\n  ${label}: CRASHED — ${row.crashed}`);
    return;
  }
  console.log(
    `\n  ${label}: opened ${row.opened} in ${(row.openMs / 1000).toFixed(1)} s` +
      (row.connectFailed ? `, ${row.connectFailed} failed to connect` : '') +
      `; server nofile ${row.limit}, fds ${row.fdsBefore} → ${row.fdsPeak} (2.5 s) → ${row.fdsEnd} (15 s)`,
  );
  console.log(
    `    shed by ${CHECKPOINTS_S.map((s, i) => `${s} s: ${row.shed[i] ?? '?'}`).join(', ')}; at 15 s: ${row.outcomes}`,
  );
  const fmt = (p: Probe) =>
    `${(p.at / 1000).toFixed(1)} s ota ${p.otaError ?? `${ms(p.otaMs)} ms`} ws ${p.wsError ?? `${ms(p.wsMs)} ms`}`;
  console.log(`    fresh client before: ${fmt(row.baseline)}`);
  for (const p of row.probes) console.log(`    fresh client at ${fmt(p)}`);
}

function printTable(rows: Row[], options: SocketsOptions): void {
  console.log(
    `\nsockets summary (${options.sockets} per flood, server nofile ${options.nofile}; fresh client = OTA 200 + ` +
      'WS hello, ms; shed = closed by the server or refused):',
  );
  const header = [
    'scenario',
    'addrs',
    'open',
    'fds peak',
    'RSS MB before→with',
    'shed 1s/5s/15s',
    'OTA p50/max',
    'WS hello p50/max',
    'served<1s',
  ];
  const lines = rows.map((row) => {
    if (row.crashed) return [row.kind, String(row.addresses), 'crashed', '', '', '', '', '', ''];
    const ota = row.probes.map((p) => p.otaMs).filter((v): v is number => v !== undefined);
    const ws = row.probes.map((p) => p.wsMs).filter((v): v is number => v !== undefined);
    const ok = row.probes.filter((p) => (served(p) ?? Infinity) < 1000).length;
    const stat = (values: number[], failed: number) =>
      (values.length ? `${ms(summarize(values).p50)}/${ms(summarize(values).max)}` : '—') +
      (failed ? ` (${failed} failed)` : '');
    return [
      row.kind,
      String(row.addresses),
      `${row.opened}/${row.opened + row.connectFailed}`,
      `${row.fdsPeak}`,
      `${mb(row.rssBefore)}→${mb(row.rssPeak)}`,
      row.shed.join('/'),
      stat(ota, row.probes.length - ota.length),
      stat(ws, row.probes.length - ws.length),
      `${ok}/${row.probes.length}`,
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cells: string[]) => `  ${cells.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`;
  console.log(fmt(header));
  for (const l of lines) console.log(fmt(l));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
