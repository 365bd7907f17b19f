// Where a feed's ICS text comes from: an http(s) URL (webcal:// too, as Apple shares them) or a file.
// Failures become FeedError with a reason safe to log and to show: never the URL, whose path or query often
// is the feed's only secret (Google's private address, a token parameter).
import { open } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export type FeedSource =
  | { kind: 'http'; url: URL; authorization: string | null; label: string }
  | { kind: 'file'; path: string; label: string }
  | { kind: 'invalid'; reason: string; label: string };

export class FeedError extends Error {
  constructor(
    message: string,
    /** True when our own close() stopped it: not a failure of the feed. */
    readonly aborted = false,
  ) {
    super(message);
    this.name = 'FeedError';
  }
}

export interface ReadLimits {
  timeoutMs: number;
  maxBytes: number;
  /** Aborted by Calendar.close(). */
  signal: AbortSignal;
}

export function parseSource(source: string, baseDir: string): FeedSource {
  const trimmed = source.trim();
  if (/^(?:https?|webcal):\/\//i.test(trimmed)) {
    let url: URL;
    try {
      url = new URL(trimmed.replace(/^webcal:/i, 'https:'));
    } catch {
      return { kind: 'invalid', reason: 'the feed URL is not a valid URL', label: 'an invalid URL' };
    }
    // fetch refuses URLs with credentials in them; CalDAV servers' ICS exports often use basic auth.
    let authorization: string | null = null;
    if (url.username || url.password) {
      const user = decodeURIComponent(url.username);
      const pass = decodeURIComponent(url.password);
      authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
      url.username = '';
      url.password = '';
    }
    return { kind: 'http', url, authorization, label: `${url.protocol}//${url.host}` };
  }
  let path: string;
  try {
    path = /^file:/i.test(trimmed) ? fileURLToPath(trimmed) : trimmed;
  } catch {
    return { kind: 'invalid', reason: 'the feed file URL is not valid', label: 'an invalid file URL' };
  }
  path = isAbsolute(path) ? path : resolve(baseDir, path);
  return { kind: 'file', path, label: path };
}

/** The feed's text, or a FeedError. Bodies past maxBytes are refused without reading them to the end. */
export async function readSource(source: FeedSource, limits: ReadLimits): Promise<string> {
  if (source.kind === 'invalid') throw new FeedError(source.reason);
  const signal = AbortSignal.any([limits.signal, AbortSignal.timeout(limits.timeoutMs)]);
  try {
    const bytes =
      source.kind === 'http'
        ? await readHttp(source, limits.maxBytes, signal)
        : await readFile(source.path, limits.maxBytes, signal);
    return new TextDecoder('utf-8').decode(bytes);
  } catch (error) {
    if (limits.signal.aborted) throw new FeedError('stopped: the calendar is closing', true);
    if (error instanceof FeedError) throw error;
    const e = error as { name?: string; code?: string; cause?: { code?: string } };
    if (e?.name === 'TimeoutError' || signal.aborted)
      throw new FeedError(`timed out after ${limits.timeoutMs} ms`);
    const code = e?.cause?.code ?? e?.code;
    if (source.kind === 'file') {
      if (code === 'ENOENT') throw new FeedError('file not found');
      throw new FeedError(`cannot read the file${code ? ` (${code})` : ''}`);
    }
    throw new FeedError(`network error${code ? ` (${code})` : ''}`);
  }
}

async function readHttp(
  source: Extract<FeedSource, { kind: 'http' }>,
  maxBytes: number,
  signal: AbortSignal,
): Promise<Uint8Array> {
  const headers: Record<string, string> = { accept: 'text/calendar, text/plain;q=0.8, */*;q=0.1' };
  if (source.authorization) headers.authorization = source.authorization;
  const response = await fetch(source.url, { signal, headers, redirect: 'follow' });
  if (!response.ok) {
    await response.body?.cancel().catch(() => {});
    throw new FeedError(`HTTP ${response.status}`);
  }
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body?.cancel().catch(() => {});
    throw new FeedError(`feed is larger than ${maxBytes} bytes`);
  }
  if (!response.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    // A chunked body has no length to check up front; stop the download as soon as it is too much.
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw new FeedError(`feed is larger than ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

async function readFile(path: string, maxBytes: number, signal: AbortSignal): Promise<Uint8Array> {
  const handle = await open(path, 'r');
  try {
    const stat = await handle.stat();
    // A FIFO or device would block or never end.
    if (!stat.isFile()) throw new FeedError('not a regular file');
    if (stat.size > maxBytes) throw new FeedError(`feed is larger than ${maxBytes} bytes`);
    const buffer = Buffer.alloc(maxBytes + 1);
    let total = 0;
    for (;;) {
      signal.throwIfAborted();
      const { bytesRead } = await handle.read(buffer, total, buffer.length - total, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      // The file grew after stat.
      if (total > maxBytes) throw new FeedError(`feed is larger than ${maxBytes} bytes`);
    }
    return buffer.subarray(0, total);
  } finally {
    await handle.close();
  }
}
