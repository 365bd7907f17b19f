import { storageProblem } from './data-dir.js';

// The one error shape of every HTTP route (DESIGN §2): {"error":{"code":"snake_case","message":"…"}}.
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export interface ErrorBody {
  error: { code: string; message: string };
}

export function errorBody(code: string, message: string): ErrorBody {
  return { error: { code, message } };
}

/** Maps whatever a route threw (ours, fastify's, a bug) to a status and the error shape. Never a stack trace. */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  // A full or read-only DATA_DIR is the operator's to fix, not a bug: 507 naming it, whichever route wrote.
  const storage = storageProblem(error);
  if (storage) return new HttpError(storage.status, storage.code, storage.message);
  const e = error as { statusCode?: number; code?: string; message?: string };
  const status = typeof e?.statusCode === 'number' ? e.statusCode : 500;
  if (status === 413)
    return new HttpError(413, 'body_too_large', 'request body is larger than this route accepts');
  if (status === 415) {
    return new HttpError(415, 'unsupported_media_type', 'send the body as application/json');
  }
  if (e?.code === 'FST_ERR_BAD_URL') {
    return new HttpError(400, 'bad_url', 'the URL is not valid (a broken percent-escape?)');
  }
  if (e?.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return new HttpError(414, 'url_too_long', 'a part of the URL is longer than this route accepts');
  }
  if (e?.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return new HttpError(400, 'empty_body', 'the JSON body is empty');
  }
  if (e?.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (status === 400 && /JSON/i.test(e?.message ?? ''))) {
    return new HttpError(400, 'malformed_json', 'the body is not valid JSON');
  }
  if (status >= 400 && status < 500) {
    return new HttpError(status, 'bad_request', e?.message ?? 'bad request');
  }
  return new HttpError(500, 'internal_error', 'internal error; see the server log');
}

/** Validates a request body against a zod schema; a bad body is a 400 naming the first bad field. */
export function parseBody<T>(
  schema: {
    safeParse(
      value: unknown,
    ):
      | { success: true; data: T }
      | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } };
  },
  body: unknown,
): T {
  const result = schema.safeParse(body ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const where = issue?.path.map(String).join('.') || 'body';
  throw new HttpError(400, 'invalid_body', `${where}: ${issue?.message ?? 'invalid'}`);
}
