// The voice server under test, alone in its own process (forked by the bench), so its CPU and memory
// are its own. Bench providers of fixed latency; real Silero VAD, real Opus, real WebSockets.
// Answers the parent over IPC: resource samples, and the stage timings of every finished turn.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseConfig } from '../src/config/index.js';
import { silentLogger } from '../src/util/log.js';
import type { Conversation, TurnTiming } from '../src/voice/conversation.js';
import { startVoiceServer } from '../src/voice/server.js';
import type { DeviceSession } from '../src/voice/session.js';
import type { ChildMessage, ChildRequest, ResourceSample, ServerSample, TurnFigures } from './ipc.js';
import { benchProviders, DEFAULT_LATENCIES } from './providers.js';

const send = (message: ChildMessage) => process.send?.(message);

async function main(): Promise<void> {
  const latencies = { ...DEFAULT_LATENCIES, ...(JSON.parse(process.argv[2] ?? '{}') as object) };
  const dataDir = mkdtempSync(join(tmpdir(), 'deskbot-bench-'));
  const config = parseConfig({
    data_dir: dataDir,
    server: { bind_host: '127.0.0.1', ws_port: 0, http_port: 0 },
    // Turn reports and perception events go nowhere (refused at once), never to a bridge someone runs on
    // the default port.
    bridge: { url: 'http://127.0.0.1:9' },
    // Every bench robot comes from 127.0.0.1: the per-address caps (64) would refuse most of them. The totals
    // stay bounded, above the largest fleet the benches run. BENCH_DEFAULT_LIMITS=1 (the sockets section)
    // keeps the shipped defaults: that run is about them.
    limits:
      process.env.BENCH_DEFAULT_LIMITS === '1'
        ? {}
        : {
            ws_max_connections: 5000,
            ws_max_connections_per_address: 5000,
            http_max_connections: 5000,
            http_max_connections_per_address: 5000,
          },
  });
  const voice = await startVoiceServer(config, silentLogger, { providers: benchProviders(latencies) });

  const conversations = new Set<Conversation>();
  const sessions = new Set<DeviceSession>();
  let turns: TurnFigures[] = [];
  let attached = 0;
  // Counts objects the server has let go of: after a forced GC, created − collected is what something
  // still holds (a leak, when it grows with the connections that came and went).
  const live = { sessions: 0, conversations: 0, sessionsCreated: 0 };
  const collected = new FinalizationRegistry<'sessions' | 'conversations'>((kind) => live[kind]--);

  voice.onSession((session) => {
    live.sessions++;
    live.sessionsCreated++;
    collected.register(session, 'sessions');
    const conversation = voice.conversationOf(session);
    if (conversation) {
      live.conversations++;
      collected.register(conversation, 'conversations');
    }
    sessions.add(session);
    session.on('closed', () => sessions.delete(session));
    // The server creates the conversation after the hello, once its VAD has loaded; there is no event for
    // it, so look until it is there.
    session.once('hello', () => {
      const started = performance.now();
      const look = () => {
        if (session.isClosed) return;
        const conversation = voice.conversationOf(session);
        if (!conversation) {
          if (performance.now() - started < 10_000) setTimeout(look, 2);
          return;
        }
        attached++;
        conversations.add(conversation);
        session.once('closed', () => {
          conversations.delete(conversation);
          attached--;
        });
        conversation.on('turn', (timing) => turns.push(figures(session.deviceId, timing)));
      };
      look();
    });
  });

  // The histogram holds timer intervals (resolution + lag); the lag is what we report.
  const resolutionMs = 5;
  const loop = monitorEventLoopDelay({ resolution: resolutionMs });
  loop.enable();

  const sample = (gc: boolean): ServerSample => {
    if (gc) (globalThis as { gc?: () => void }).gc?.();
    const totals = { droppedAudio: 0, droppedAudioOut: 0, utterances: 0, replies: 0 };
    for (const c of conversations) {
      totals.droppedAudio += c.stats.droppedAudio;
      totals.utterances += c.stats.utterances;
      totals.replies += c.stats.replies;
    }
    for (const s of sessions) totals.droppedAudioOut += s.stats.droppedAudioOut;
    const lag = (ns: number) => Math.max(0, ns / 1e6 - resolutionMs);
    const loopDelay = { p50: lag(loop.percentile(50)), p99: lag(loop.percentile(99)), max: lag(loop.max) };
    loop.reset();
    return {
      at: performance.now(),
      cpu: process.cpuUsage(),
      memory: process.memoryUsage(),
      sessions: voice.registry.size,
      attached,
      ...totals,
      loopDelay,
    };
  };

  const resources = async (): Promise<ResourceSample> => {
    // Finalizers and native weak callbacks run after the GC, on later turns of the loop: collect, let them
    // run, collect again.
    for (let i = 0; i < 3; i++) {
      (globalThis as { gc?: () => void }).gc?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    const handles: Record<string, number> = {};
    for (const type of process.getActiveResourcesInfo()) handles[type] = (handles[type] ?? 0) + 1;
    let fds = -1;
    try {
      fds = readdirSync('/proc/self/fd').length;
    } catch {
      // no /proc (not Linux): the handle counts still stand
    }
    return {
      memory: process.memoryUsage(),
      handles,
      fds,
      registry: voice.registry.size,
      sessions: sessions.size,
      attached,
      liveSessions: live.sessions,
      liveConversations: live.conversations,
      sessionsCreated: live.sessionsCreated,
    };
  };

  process.on('message', async (request: ChildRequest) => {
    switch (request.cmd) {
      case 'sample':
        send({ type: 'reply', id: request.id, result: sample(request.gc === true) });
        break;
      case 'resources':
        send({ type: 'reply', id: request.id, result: await resources() });
        break;
      case 'turns':
        send({ type: 'reply', id: request.id, result: turns });
        turns = [];
        break;
      case 'exit':
        await voice.close().catch(() => undefined);
        rmSync(dataDir, { recursive: true, force: true });
        process.exit(0);
    }
  });
  process.on('disconnect', () => {
    rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
  send({ type: 'ready', wsPort: voice.wsPort, httpPort: voice.httpPort });
}

function figures(deviceId: string, t: TurnTiming): TurnFigures {
  const out: TurnFigures = { deviceId, aborted: t.aborted };
  if (t.utteranceEndAt !== undefined && t.firstAudioAt !== undefined)
    out.totalMs = t.firstAudioAt - t.utteranceEndAt;
  if (t.asrMs !== undefined) out.asrMs = t.asrMs;
  if (t.modelFirstTokenAt !== undefined) out.modelMs = t.modelFirstTokenAt - t.replyStartAt;
  if (t.ttsFirstChunkMs !== undefined) out.ttsFirstChunkMs = t.ttsFirstChunkMs;
  if (t.utteranceEndAt !== undefined && t.asrMs !== undefined)
    out.asrToReplyMs = t.replyStartAt - (t.utteranceEndAt + t.asrMs);
  if (t.modelFirstTokenAt !== undefined && t.ttsFirstChunkMs !== undefined && t.firstAudioAt !== undefined)
    out.ttsToAudioMs = t.firstAudioAt - (t.modelFirstTokenAt + t.ttsFirstChunkMs);
  return out;
}

main().catch((error: unknown) => {
  send({ type: 'error', message: (error as Error).stack ?? String(error) });
  process.exit(1);
});
