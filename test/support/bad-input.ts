// Bad input for the route tables (test/wire/bad-input-*.test.ts): raw HTTP requests, the hostile bodies every
// JSON POST route must refuse, and the checks on each answer. Raw node:http rather than fetch, because fetch
// normalises `..` and `%2e` out of paths, always sends a content-type with a body and cannot lie about sizes.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { expectErrorShape, expectNoStack, parseOrUndefined, type Reply } from './http.js';

export interface RawRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send the body with Transfer-Encoding: chunked (no Content-Length to refuse it by). */
  chunked?: boolean;
  /** An endless reply (server-sent events): take the status and headers, then hang up. */
  headersOnly?: boolean;
}

export interface RawReply extends Reply {
  headers: IncomingHttpHeaders;
}

/** One request over a fresh connection, exactly as given; the reply even when the server answers mid-upload. */
export function send(
  base: string,
  { method, path, headers = {}, body, chunked = false, headersOnly = false }: RawRequest,
): Promise<RawReply> {
  const url = new URL(base);
  const length = body !== undefined && !chunked ? { 'content-length': String(Buffer.byteLength(body)) } : {};
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: { connection: 'close', ...headers, ...length },
        agent: false,
        timeout: 30_000,
      },
      (res) => {
        answered = true;
        if (headersOnly) {
          resolve({ status: res.statusCode ?? 0, text: '', json: undefined, headers: res.headers });
          req.destroy();
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, text, json: parseOrUndefined(text), headers: res.headers });
        });
      },
    );
    // A 413 may arrive (and the socket close) while the body is still going out: that is the answer.
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
    if (body !== undefined && chunked) {
      const data = Buffer.from(body);
      for (let at = 0; at < data.length; at += 64 * 1024) req.write(data.subarray(at, at + 64 * 1024));
    } else if (body !== undefined) {
      req.write(body);
    }
    req.end();
  });
}

/** Bytes written straight onto a TCP connection (what no HTTP client will send); the reply's status and body. */
export function sendBytes(base: string, bytes: string): Promise<Reply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error: Error) => (chunks.length > 0 ? undefined : reject(error)));
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
      const text = raw.slice(raw.indexOf('\r\n\r\n') + 4);
      resolve({ status, text, json: parseOrUndefined(text) });
    });
  });
}

/** What a case accepts: exact status(es), or a predicate. */
export type Expected = number | readonly number[] | ((status: number) => boolean);

export interface BadCase {
  name: BadCaseName;
  headers: Record<string, string>;
  body: string | Buffer;
  chunked?: boolean;
  expected: Expected;
}

export const BAD_CASE_NAMES = [
  'malformed JSON',
  'a JSON array',
  'a JSON string',
  'a JSON number',
  'JSON null',
  'wrong field types',
  'a __proto__ key',
  'one byte over the body limit',
  'over the body limit, chunked',
  'exactly at the body limit',
  'content-type application/xml',
  'no content-type',
  'content-type text/plain',
  'an empty body',
] as const;
export type BadCaseName = (typeof BAD_CASE_NAMES)[number];

const JSON_TYPE = { 'content-type': 'application/json' };

/** `{"pad":"xxx…"}` of exactly `bytes` bytes: valid JSON, so only its size can be wrong. */
export function paddedJson(bytes: number): string {
  return `{"pad":"${'x'.repeat(Math.max(0, bytes - 10))}"}`;
}

/** A 503 (no device connected, no upstream) is a fair answer to a body that happens to be valid. */
const notServerError = (status: number) => status < 500 || status === 503;

/**
 * The hostile bodies for one JSON POST route. `limit` is its body limit in bytes; `wrongTypes` a body with the
 * route's own fields of the wrong type; `overrides` for answers that differ on purpose.
 */
export function jsonPostCases(options: {
  limit: number;
  wrongTypes: unknown;
  overrides?: Partial<Record<BadCaseName, Expected>>;
}): BadCase[] {
  const base = {};
  const json = JSON_TYPE;
  const cases: BadCase[] = [
    { name: 'malformed JSON', headers: json, body: '{"a":', expected: 400 },
    { name: 'a JSON array', headers: json, body: '[1,2,3]', expected: 400 },
    { name: 'a JSON string', headers: json, body: '"hello"', expected: 400 },
    { name: 'a JSON number', headers: json, body: '42', expected: 400 },
    // null reads as "no body": routes whose fields are all optional may accept it; never a 500 though.
    { name: 'JSON null', headers: json, body: 'null', expected: notServerError },
    { name: 'wrong field types', headers: json, body: JSON.stringify(options.wrongTypes), expected: 400 },
    { name: 'a __proto__ key', headers: json, body: '{"__proto__":{"polluted":true}}', expected: 400 },
    {
      name: 'one byte over the body limit',
      headers: json,
      body: paddedJson(options.limit + 1),
      expected: 413,
    },
    {
      name: 'over the body limit, chunked',
      headers: json,
      body: paddedJson(options.limit + 64 * 1024),
      chunked: true,
      expected: 413,
    },
    {
      name: 'exactly at the body limit',
      headers: json,
      body: paddedJson(options.limit),
      expected: (s) => s !== 413 && notServerError(s),
    },
    {
      name: 'content-type application/xml',
      headers: { ...base, 'content-type': 'application/xml' },
      body: '<a/>',
      expected: 415,
    },
    { name: 'no content-type', headers: base, body: '{"a":1}', expected: 415 },
    // fastify parses text/plain as a string, which no route accepts as its body.
    {
      name: 'content-type text/plain',
      headers: { ...base, 'content-type': 'text/plain' },
      body: '{"a":1}',
      expected: 400,
    },
    { name: 'an empty body', headers: json, body: '', expected: 400 },
  ];
  return cases.map((c) =>
    options.overrides?.[c.name] === undefined ? c : { ...c, expected: options.overrides[c.name]! },
  );
}

export function statusMatches(expected: Expected, status: number): boolean {
  if (typeof expected === 'function') return expected(status);
  if (typeof expected === 'number') return status === expected;
  return expected.includes(status);
}

/** A refused request: the expected status, the DESIGN §2 error shape, no stack, nothing of `secret` echoed. */
export function expectRefusal(reply: Reply, expected: Expected, what: string): void {
  expect(
    statusMatches(expected, reply.status),
    `${what}: status ${reply.status}: ${reply.text.slice(0, 300)}`,
  ).toBe(true);
  if (reply.status >= 400) expectErrorShape(reply, (s) => s >= 400);
  else expectNoStack(reply.text);
  expect(reply.status, `${what}: a 5xx for bad input`).not.toBe(500);
}

/** fastify's route list, as `METHOD url` (HEAD routes fastify adds for GET left out). */
export function routeKey(method: string, url: string): string {
  return `${method} ${url}`;
}

/** One row of a route table: a route as fastify registered it and how to reach and judge it. */
export interface RouteRow {
  /** OPTIONS: a CORS preflight route (only its 204 and headers are judged). */
  method: 'GET' | 'POST' | 'OPTIONS';
  /** As registered with fastify. */
  route: string;
  /** The path requested (default: `route`). */
  path?: string;
  /** What gets the request past the route's own gate, so the body itself is judged. */
  gate?: () => Record<string, string>;
  /** GET: the status of a plain, well-formed request. */
  ok?: Expected;
  /** GET: an endless event stream; only its status is read. */
  stream?: boolean;
  /** POST with a JSON body: the route's fields with the wrong types. */
  wrongTypes?: unknown;
  overrides?: Parameters<typeof jsonPostCases>[0]['overrides'];
}

export const pathOf = (row: RouteRow) => row.path ?? row.route;

export interface TableSuiteOptions {
  base: () => string;
  /** The server's body limit. */
  limit: number;
  /** Asserts the server still answers. */
  expectAlive: () => Promise<void>;
}

/** The table and fastify's own route list (recorded by test/support/route-recorder.ts) name the same routes. */
export function expectTableCoversRoutes(rows: readonly RouteRow[], seen: Set<string>, atLeast: number): void {
  const table = new Set(rows.map((row) => routeKey(row.method, row.route)));
  expect(seen.size).toBeGreaterThan(atLeast);
  expect(
    [...seen].filter((route) => !table.has(route)),
    'routes missing from ROUTES',
  ).toEqual([]);
  expect(
    [...table].filter((route) => !seen.has(route)),
    'ROUTES rows for no route',
  ).toEqual([]);
}

/** Every hostile body against every POST row, a broken percent-escape in every row's path, and requests
 *  node's HTTP parser refuses. */
export function describeBadBodiesAndUrls(rows: readonly RouteRow[], options: TableSuiteOptions): void {
  describe.each(rows.filter((row) => row.method === 'POST'))('POST $route', (row) => {
    const cases: BadCase[] = jsonPostCases({
      limit: options.limit,
      wrongTypes: row.wrongTypes,
      ...(row.overrides ? { overrides: row.overrides } : {}),
    });
    it.each(cases)('$name', async (c) => {
      const reply = await send(options.base(), {
        method: 'POST',
        path: pathOf(row),
        headers: { ...row.gate?.(), ...c.headers },
        body: c.body,
        ...(c.chunked ? { chunked: true } : {}),
      });
      expectRefusal(reply, c.expected, `${c.name} → POST ${row.route}`);
      await options.expectAlive();
    });
  });

  describe.each([...rows])('$method $route with a broken URL', (row) => {
    it('is a 400 in the error shape for a bad percent-escape in the path', async () => {
      const reply = await send(options.base(), {
        method: row.method,
        path: `${pathOf(row)}%E0%A4%A`,
        headers: row.gate?.() ?? {},
      });
      expectErrorShape(reply, (s) => s === 400 || s === 404);
      await options.expectAlive();
    });
  });

  describe('requests the HTTP parser refuses', () => {
    it('answers a header block over 16 KiB with 431 in the error shape', async () => {
      const reply = await sendBytes(
        options.base(),
        `GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ${'p'.repeat(20_000)}\r\n\r\n`,
      );
      expectErrorShape(reply, 431, 'headers_too_large');
      await options.expectAlive();
    });

    it.each([
      ['a broken request line', 'NOT HTTP AT ALL\r\n\r\n'],
      ['a bad header line', 'GET /metrics HTTP/1.1\r\nHost x\r\n\r\n'],
      ['a lying Content-Length', 'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n'],
      [
        'two Content-Lengths',
        'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      ],
    ])('answers %s with 400 in the error shape', async (_name, bytes) => {
      expectErrorShape(await sendBytes(options.base(), bytes), 400, 'bad_request');
      await options.expectAlive();
    });
  });
}
