// HTTP helpers for tests against a running bridge: JSON requests, the DESIGN §2 error shape, and polling.
import { expect } from 'vitest';

export interface Reply {
  status: number;
  text: string;
  json: any;
}

/** Sends a request (a JSON body unless it is already a string) and reads the whole reply. */
export async function request(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply & { headers: Headers }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  return { status: response.status, text, json: parseOrUndefined(text), headers: response.headers };
}

export const post = (base: string, path: string, body: unknown) => request(base, 'POST', path, body);

/** JSON.parse, or undefined for a body that is not JSON. */
export function parseOrUndefined(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** No stack trace, internal path or source location anywhere in a body. */
export function expectNoStack(text: string): void {
  expect(text).not.toMatch(/\n\s+at\s|node:internal|node_modules|\.ts:\d+:\d+|\.js:\d+:\d+/);
}

/**
 * The DESIGN §2 error shape `{ error: { code, message } }` with a non-empty message and no stack trace.
 * `status` is the exact status, or a predicate where more than one is allowed.
 */
export function expectErrorShape(
  reply: Reply,
  status: number | ((status: number) => boolean),
  code?: string,
): void {
  if (typeof status === 'number') expect(reply.status, reply.text).toBe(status);
  else expect(status(reply.status), `status ${reply.status}: ${reply.text}`).toBe(true);
  expect(reply.json, reply.text).toEqual({
    error: { code: code ?? expect.stringMatching(/^[a-z][a-z0-9_]*$/), message: expect.any(String) },
  });
  expect(reply.json.error.message.length).toBeGreaterThan(0);
  expectNoStack(reply.text);
}

/**
 * Polls `check` every 50 ms until it gives a truthy value; a rejection counts as "not yet" (e.g. a server
 * still starting). Throws after `timeoutMs`.
 */
export async function eventuallyOk<T>(
  check: () => Promise<T | undefined | null | false>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits until a bridge (or any server) answers its /health with 2xx. */
export const healthy = (baseUrl: string, timeoutMs: number) =>
  eventuallyOk(async () => (await fetch(`${baseUrl}/health`)).ok, timeoutMs);
