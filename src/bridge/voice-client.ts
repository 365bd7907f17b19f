// The bridge's calls to the voice server's admin routes (VOICE_URL). Every call has a deadline; failures
// come back as VoiceCallError with the voice server's error code when it sent one.
import { joinUrl } from '../providers/openai-client.js';

export class VoiceCallError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'VoiceCallError';
  }
}

export class VoiceClient {
  /** `token`: VOICE_ADMIN_TOKEN, sent as a bearer token when the voice server's admin routes require one. */
  constructor(
    readonly url: string,
    private readonly token = '',
  ) {}

  async post<T = Record<string, unknown>>(
    route: string,
    body: Record<string, unknown>,
    timeoutMs = 5000,
    signal?: AbortSignal,
  ): Promise<T> {
    return this.call<T>('POST', route, body, timeoutMs, signal);
  }

  async get<T = Record<string, unknown>>(route: string, timeoutMs = 5000): Promise<T> {
    return this.call<T>('GET', route, undefined, timeoutMs);
  }

  private async call<T>(
    method: string,
    route: string,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<T> {
    const timeout = AbortSignal.timeout(timeoutMs);
    let response: Response;
    try {
      response = await fetch(joinUrl(this.url, `device/admin/${route}`), {
        method,
        headers: {
          ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
          ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
      });
    } catch (error) {
      if (timeout.aborted)
        throw new VoiceCallError(
          504,
          'voice_timeout',
          `voice server did not answer ${route} in ${timeoutMs} ms`,
        );
      throw new VoiceCallError(
        503,
        'voice_unreachable',
        `voice server unreachable at ${this.url}: ${(error as Error).message}`,
      );
    }
    const json = (await response.json().catch(() => ({}))) as T & {
      error?: { code?: string; message?: string };
    };
    if (!response.ok) {
      throw new VoiceCallError(
        response.status,
        json.error?.code ?? 'voice_error',
        json.error?.message ?? `HTTP ${response.status}`,
      );
    }
    return json;
  }
}
