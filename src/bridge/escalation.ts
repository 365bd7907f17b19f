// The four escalation tools of the two-tier provider (SPEC "Tool catalogue"), as the bridge runs them.
// Every tool ends within its deadline with a result the small model can say something about.
import type { MemoryStore } from '../agent/memory.js';
import type { EscalationTool } from '../providers/llm/tools.js';
import { joinUrl } from '../providers/openai-client.js';
import type { Logger } from '../util/log.js';
import type { VoiceClient } from './voice-client.js';

export const RESULT_MAX_CHARS = 1000;

export interface EscalationDeps {
  memory: () => Promise<MemoryStore>;
  voice: VoiceClient;
  kidMode: () => boolean;
  /** The local router for think_hard ('' = none configured). */
  localRouter: { url: string; thinkModel: string };
  visionAvailable: () => boolean;
  /** memory_lookup, play_song, take_photo (BRIDGE_TIMEOUT_SHORT). */
  shortTimeoutMs: number;
  /** think_hard (VOICE_THINKER_TIMEOUT). */
  thinkTimeoutMs: number;
  logger: Logger;
}

/** `signal`: the caller went away; the tool's own requests are cancelled with it. */
export async function escalate(
  tool: EscalationTool,
  args: Record<string, unknown>,
  deps: EscalationDeps,
  signal?: AbortSignal,
): Promise<string> {
  const timeoutMs = tool === 'think_hard' ? deps.thinkTimeoutMs : deps.shortTimeoutMs;
  const controller = new AbortController();
  const onCallerGone = () => controller.abort();
  if (signal?.aborted) controller.abort();
  signal?.addEventListener('abort', onCallerGone, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<string>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve(`(${tool} took too long)`);
    }, timeoutMs);
  });
  try {
    const result = await Promise.race([run(tool, args, deps, controller.signal), deadline]);
    return result.slice(0, RESULT_MAX_CHARS);
  } catch (error) {
    if (signal?.aborted) deps.logger.info({ tool }, 'escalation cancelled: the caller went away');
    else deps.logger.warn({ tool, err: (error as Error).message }, 'escalation tool failed');
    return `(${tool} unavailable)`;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onCallerGone);
  }
}

async function run(
  tool: EscalationTool,
  args: Record<string, unknown>,
  deps: EscalationDeps,
  signal: AbortSignal,
): Promise<string> {
  switch (tool) {
    case 'memory_lookup':
      return memoryLookup(String(args.query ?? ''), deps);
    case 'think_hard':
      return thinkHard(String(args.question ?? ''), deps, signal);
    case 'play_song':
      return playSong(String(args.name ?? ''), deps, signal);
    case 'take_photo':
      return takePhoto(typeof args.question === 'string' ? args.question : '', deps, signal);
  }
}

/** Keyword search over the agent's memory; no model call. */
async function memoryLookup(query: string, deps: EscalationDeps): Promise<string> {
  if (!query.trim()) return '(memory_lookup needs a query)';
  const store = await deps.memory();
  await store.refresh(); // picks up hand edits of the memory files, cheaply (it compares sizes and times)
  const hits = store.search(query, 5);
  if (hits.length === 0) return `Nothing remembered about "${query}".`;
  return hits.map((hit) => `- ${hit.text}${hit.date ? ` (${hit.date})` : ''}`).join('\n');
}

/** The large local reasoning model through the local router. */
async function thinkHard(question: string, deps: EscalationDeps, signal: AbortSignal): Promise<string> {
  if (!deps.localRouter.url) return '(think_hard unavailable: no local router is configured)';
  const response = await fetch(joinUrl(deps.localRouter.url, 'chat/completions'), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      model: deps.localRouter.thinkModel,
      stream: false,
      max_tokens: 600,
      messages: [
        {
          role: 'system',
          content:
            'Think the question through carefully, then give a short, correct answer that can be read aloud.',
        },
        { role: 'user', content: question },
      ],
    }),
    signal,
  });
  if (!response.ok) throw new Error(`local router answered HTTP ${response.status}`);
  const body = (await response.json()) as { choices?: Array<{ message?: { content?: string } }> };
  const answer = body.choices?.[0]?.message?.content?.trim();
  if (!answer) throw new Error('local router returned no answer');
  return answer.replace(/<think>[\s\S]*?<\/think>/g, '').trim();
}

/** Fire-and-forget: the song starts on the robot; the tool returns as soon as it is queued. */
async function playSong(name: string, deps: EscalationDeps, signal: AbortSignal): Promise<string> {
  const { songs } = await deps.voice.get<{ songs: Array<{ name: string }> }>('songs', deps.shortTimeoutMs);
  const wanted = name.trim().toLowerCase();
  const match =
    songs.find((s) => s.name.toLowerCase() === wanted) ??
    songs.find((s) => wanted && s.name.toLowerCase().includes(wanted));
  if (!match) {
    const known = songs.map((s) => s.name).join(', ') || 'none';
    return `There is no song called "${name}". Songs available: ${known}.`;
  }
  await deps.voice.post('play-asset', { name: match.name }, deps.shortTimeoutMs, signal);
  return `Playing "${match.name}" now.`;
}

/** The device camera → the voice server's vision endpoint → the VLM → a description. */
async function takePhoto(question: string, deps: EscalationDeps, signal: AbortSignal): Promise<string> {
  if (deps.kidMode()) return 'Taking photos is turned off in kid mode.';
  if (!deps.visionAvailable()) {
    return 'Vision is unavailable right now (no vision API key is configured), so I cannot say what the camera sees.';
  }
  const reply = await deps.voice.post<{ result?: string }>(
    'take-photo',
    { question: question || 'Describe what you see in one or two short sentences.' },
    deps.shortTimeoutMs,
    signal,
  );
  return visionText(reply.result ?? '');
}

/** The device's take_photo result is the vision endpoint's JSON ({success, response} or {success:false, message}). */
export function visionText(raw: string): string {
  try {
    const parsed = JSON.parse(raw) as { success?: boolean; response?: string; message?: string };
    if (parsed.success === false) return `(take_photo unavailable: ${parsed.message ?? 'vision failed'})`;
    if (typeof parsed.response === 'string') return parsed.response;
  } catch {
    // plain text result
  }
  return raw || '(take_photo unavailable)';
}
