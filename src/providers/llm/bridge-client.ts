// The voice server's calls into the bridge: tool escalations (bounded by per-tool timeouts, always a result
// the model can use) and the memory side channel (2 s, never raises: failures are logged and the turn goes on).
import type { Logger } from '../../util/log.js';
import { joinUrl } from '../openai-client.js';
import type { EscalationTool } from './tools.js';

export const RESULT_MAX_CHARS = 1000;
const SIDE_CHANNEL_TIMEOUT_MS = 2000;

export interface BridgeClientOptions {
  url: string;
  logger: Logger;
}

export class BridgeClient {
  constructor(private readonly options: BridgeClientOptions) {}

  get url(): string {
    return this.options.url;
  }

  /** POST /api/voice/escalate. On timeout or failure the result says so (DESIGN §3), so the model can too. */
  async escalate(
    tool: EscalationTool,
    args: Record<string, unknown>,
    sessionId: string,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<string> {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const response = await fetch(joinUrl(this.options.url, 'api/voice/escalate'), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ tool, args, session_id: sessionId }),
        signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
      });
      const body = (await response.json().catch(() => null)) as { result?: unknown } | null;
      if (!response.ok || typeof body?.result !== 'string') throw new Error(`HTTP ${response.status}`);
      return body.result.slice(0, RESULT_MAX_CHARS);
    } catch (error) {
      if (signal?.aborted) throw error;
      const timedOut = timeout.aborted;
      this.options.logger.warn({ tool, err: (error as Error).message, timedOut }, 'escalation failed');
      return timedOut ? `(${tool} took too long)` : `(${tool} unavailable)`;
    }
  }

  /** POST /api/voice/remember; never raises. */
  remember(fact: string, sessionId: string): Promise<boolean> {
    return this.sideChannel('api/voice/remember', { fact, session_id: sessionId });
  }

  /** POST /api/voice/memory_log; never raises. */
  memoryLog(user: string, assistant: string, sessionId: string): Promise<boolean> {
    return this.sideChannel('api/voice/memory_log', { user, assistant, session_id: sessionId });
  }

  private async sideChannel(path: string, body: Record<string, string>): Promise<boolean> {
    try {
      const response = await fetch(joinUrl(this.options.url, path), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(SIDE_CHANNEL_TIMEOUT_MS),
      });
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return true;
    } catch (error) {
      this.options.logger.warn(
        { path, err: (error as Error).message },
        'memory side channel failed; turn continues',
      );
      return false;
    }
  }
}
