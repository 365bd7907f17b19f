// TwoTier (SPEC "Two-tier provider behavior"): a small fast model answers every plain turn itself; when it
// calls a tool, the call is escalated to the bridge and the result goes back to the model for the answer.
// Smart mode swaps the inner-loop endpoint to the cloud model in-process, effective from the next turn.
import { existsSync, readFileSync } from 'node:fs';
import type { Logger } from '../../util/log.js';
import { type Deadlines, type Endpoint, streamChat, type ToolCall } from '../openai-client.js';
import type { BridgeClient } from './bridge-client.js';
import { LeadingEmojiFilter, RememberFilter } from './text-filters.js';
import { isEscalationTool, isLongTool, TOOL_FILLERS, TOOL_SCHEMAS } from './tools.js';
import type { LlmProvider, LlmTurn } from './types.js';
import { buildMessages } from './voice-rules.js';

export interface ModelEndpoint extends Endpoint {
  apiKey: string;
  model: string;
}

export interface TwoTierOptions {
  local: ModelEndpoint;
  cloud: ModelEndpoint;
  smartMode: boolean;
  maxTokens: number;
  temperature: number;
  timeoutSec: number;
  /** '' = no persona: the dialogue's system messages are merged. */
  personaFile: string;
  bridge: BridgeClient;
  shortTimeoutMs: number;
  longTimeoutMs: number;
  logger: Logger;
  /** Model calls per turn that may use tools; the last call is always without tools. */
  maxToolRounds?: number;
}

export class ProviderConfigError extends Error {
  constructor(
    readonly code: 'no_cloud_key' | 'blank_api_key',
    message: string,
  ) {
    super(message);
    this.name = 'ProviderConfigError';
  }
}

export class TwoTierLlm implements LlmProvider {
  readonly name = 'TwoTier';
  private local: ModelEndpoint;
  private cloud: ModelEndpoint;
  private smart: boolean;
  private personaMissingLogged = false;

  constructor(private readonly options: TwoTierOptions) {
    this.local = withTrimmedKey(options.local);
    this.cloud = withTrimmedKey(options.cloud);
    this.smart = false;
    if (options.smartMode) {
      try {
        this.setSmartMode(true);
      } catch (error) {
        options.logger.warn(
          { err: (error as Error).message },
          'smart mode is on but cannot be used; staying local',
        );
      }
    }
  }

  get smartMode(): boolean {
    return this.smart;
  }

  /** The endpoint the next turn will use. */
  get active(): Readonly<ModelEndpoint> {
    return this.smart ? this.cloud : this.local;
  }

  describe(): string {
    const a = this.active;
    return `TwoTier ${a.model} at ${a.url} (smart mode ${this.smart ? 'on' : 'off'}; tools via ${this.options.bridge.url})`;
  }

  /** Flips the inner-loop model; fails fast, changing nothing, when smart mode has no cloud key. */
  setSmartMode(on: boolean): void {
    if (on && !this.cloud.apiKey) {
      throw new ProviderConfigError(
        'no_cloud_key',
        'smart mode needs a cloud API key: set TWOTIER_CLOUD_API_KEY (or CLOUD_ROUTER_API_KEY)',
      );
    }
    this.smart = on;
  }

  /** set-tier1slim-model: replaces the live endpoint; a blank key (whitespace only counts as blank) never
   *  replaces a non-empty one, so a flip fails fast instead of looping on 401. */
  hotSwap(next: { model: string; url: string; apiKey: string }): void {
    const current = this.smart ? this.cloud : this.local;
    const swapped = withTrimmedKey({ url: next.url, apiKey: next.apiKey, model: next.model });
    if (!swapped.apiKey && current.apiKey) {
      throw new ProviderConfigError(
        'blank_api_key',
        'refusing to replace a non-empty api_key with a blank one',
      );
    }
    if (this.smart) this.cloud = swapped;
    else this.local = swapped;
  }

  async *reply(turn: LlmTurn): AsyncIterable<string> {
    const endpoint = { ...this.active }; // a flip during this turn applies to the next one
    const seconds = this.options.timeoutSec * 1000;
    const deadlines: Deadlines = { responseMs: seconds, idleMs: Math.min(seconds, 30_000), totalMs: seconds };
    const messages = buildMessages({
      history: turn.history,
      persona: this.persona(),
      systemPrompt: turn.systemPrompt,
      kidMode: turn.kidMode,
    });
    const remember = new RememberFilter();
    const emoji = new LeadingEmojiFilter();
    let spoken = '';
    const maxRounds = this.options.maxToolRounds ?? 2;
    for (let round = 0; ; round++) {
      const withTools = round < maxRounds;
      const stream = streamChat(
        endpoint,
        {
          model: endpoint.model,
          messages,
          max_tokens: this.options.maxTokens,
          temperature: this.options.temperature,
          ...(withTools ? { tools: TOOL_SCHEMAS, tool_choice: 'auto' as const } : {}),
        },
        deadlines,
        turn.signal,
      );
      let text = '';
      let calls: ToolCall[] = [];
      for await (const chunk of stream) {
        if (chunk.type === 'tool_calls') {
          calls = chunk.calls;
          continue;
        }
        text += chunk.text;
        const out = emoji.push(remember.push(chunk.text));
        if (out) {
          spoken += out;
          yield out;
        }
      }
      if (calls.length === 0 || !withTools) break;
      messages.push({ role: 'assistant', content: text || null, tool_calls: calls });
      for (const call of calls) {
        messages.push({ role: 'tool', tool_call_id: call.id, content: await this.runTool(call, turn) });
      }
    }
    const tail = emoji.push(remember.end()) + emoji.end();
    if (tail) {
      spoken += tail;
      yield tail;
    }
    if (turn.signal.aborted) return;
    // The side channel never delays or breaks the turn.
    for (const fact of remember.facts) void this.options.bridge.remember(fact, turn.sessionId);
    const user = [...turn.history].reverse().find((m) => m.role === 'user')?.content ?? '';
    void this.options.bridge.memoryLog(user, spoken.trim(), turn.sessionId);
  }

  private async runTool(call: ToolCall, turn: LlmTurn): Promise<string> {
    const name = call.function.name;
    if (!isEscalationTool(name)) return `(unknown tool ${name})`;
    let args: Record<string, unknown>;
    try {
      const parsed = JSON.parse(call.function.arguments || '{}') as unknown;
      args =
        typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
          ? (parsed as Record<string, unknown>)
          : {};
    } catch {
      return `(${name} unavailable: the arguments were not valid JSON)`;
    }
    const filler = TOOL_FILLERS[name];
    if (filler) turn.say(filler);
    const timeoutMs = isLongTool(name) ? this.options.longTimeoutMs : this.options.shortTimeoutMs;
    this.options.logger.info({ tool: name, session: turn.sessionId }, 'escalating tool call to the bridge');
    return this.options.bridge.escalate(name, args, turn.sessionId, timeoutMs, turn.signal);
  }

  private persona(): string | undefined {
    const file = this.options.personaFile;
    if (!file) return undefined;
    if (!existsSync(file)) {
      if (!this.personaMissingLogged) {
        this.personaMissingLogged = true;
        this.options.logger.warn({ file }, 'persona file not found; using the merged system messages');
      }
      return undefined;
    }
    return readFileSync(file, 'utf8');
  }
}

/** Keys are sent as `Bearer <key>`: surrounding whitespace is never part of one, and a key of only
 *  whitespace is no key (no Authorization header at all rather than an empty bearer). */
function withTrimmedKey(endpoint: ModelEndpoint): ModelEndpoint {
  return { ...endpoint, apiKey: endpoint.apiKey.trim() };
}
