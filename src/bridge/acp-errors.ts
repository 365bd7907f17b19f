// The ACP client's error type, and the rule that tells a lost session apart from any other agent error.
import { RequestError } from '@agentclientprotocol/sdk';

/** Why a prompt failed; the bridge maps these to HTTP statuses and fallback replies. */
export type AcpErrorCode =
  | 'timeout' // the turn deadline passed (session/cancel was sent if the prompt had reached the agent)
  | 'aborted' // the caller's AbortSignal fired (same cancel as above)
  | 'agent_crashed' // the child exited or its stdio broke while this turn was in flight
  | 'busy' // too many prompts already queued for this conversation, or too many conversations running
  | 'closed' // close() was called
  | 'session_not_found' // the agent refused the session twice in a row (after one retry on a fresh session)
  | 'init_failed' // the child did not answer initialize in time, or with an incompatible protocol version
  | 'unavailable' // the runtime is down (crashed or failing to start) and the caller chose not to wait
  | 'agent_error'; // any other JSON-RPC error the agent returned (see rpcCode)

export class AcpClientError extends Error {
  readonly code: AcpErrorCode;
  /** The JSON-RPC error code when the agent itself answered with an error. */
  readonly rpcCode: number | undefined;

  constructor(code: AcpErrorCode, message: string, options: { cause?: unknown; rpcCode?: number } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AcpClientError';
    this.code = code;
    this.rpcCode = options.rpcCode;
  }
}

/** JSON-RPC "Resource not found"; ACP's answer for an unknown session (data.sessionId names it). */
const RESOURCE_NOT_FOUND = -32002;

/** The rule: JSON-RPC -32002 (Resource not found) naming our session in data.sessionId, or naming no session
 *  at all; or any error whose message/data says the session is unknown (agents that predate the SDK helper). */
export function isSessionNotFound(error: unknown, sessionId: string): boolean {
  if (!(error instanceof RequestError)) return false;
  const data = error.data as { sessionId?: unknown } | undefined;
  if (error.code === RESOURCE_NOT_FOUND) {
    return typeof data?.sessionId !== 'string' || data.sessionId === sessionId;
  }
  let details = error.message;
  try {
    details += ` ${JSON.stringify(error.data ?? '')}`;
  } catch {
    // unserialisable data: the message alone decides
  }
  return /session[^.]{0,40}not\s+found|unknown\s+session|no\s+such\s+session/i.test(details);
}
