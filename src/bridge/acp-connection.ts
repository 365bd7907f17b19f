// The bridge's side of the ACP connection to one agent child: streamed session updates go to whoever is
// waiting for that session's turn, and every request the agent makes of us is refused, because the bridge
// runs unattended and advertises no client capabilities (no fs, no terminal, nobody to grant permissions).
import type { ChildProcess } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import {
  client as acpClient,
  type ClientConnection,
  methods,
  ndJsonStream,
  RequestError,
  type RequestPermissionResponse,
  type SessionNotification,
} from '@agentclientprotocol/sdk';
import type { Logger } from '../util/log.js';

/** Speaks newline-delimited JSON-RPC over the child's stdio. */
export function connectToAgent(
  child: ChildProcess,
  log: Logger,
  onSessionUpdate: (notification: SessionNotification) => void,
): ClientConnection {
  const app = acpClient({ name: 'deskbot-bridge' })
    .onNotification(methods.client.session.update, ({ params }) => onSessionUpdate(params))
    .onRequest(methods.client.session.requestPermission, ({ params }) => refusePermission(params, log))
    .onRequest('*', ({ method }) => {
      // fs/*, terminal/*, elicitation and extensions: we advertise none of them.
      log.debug({ method }, 'refusing an agent request the bridge does not offer');
      throw RequestError.methodNotFound(method);
    });
  return app.connect(
    ndJsonStream(
      Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
      Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
    ),
  );
}

function refusePermission(
  params: { options: Array<{ optionId: string; kind: string }> },
  log: Logger,
): RequestPermissionResponse {
  // Nobody can grant anything. Pick the agent's own "reject" option when it offers one; otherwise answer
  // "cancelled", the only other outcome ACP defines.
  const reject =
    params.options.find((option) => option.kind === 'reject_once') ??
    params.options.find((option) => option.kind === 'reject_always');
  log.info({ option: reject?.optionId ?? null }, 'agent asked for permission; refused');
  return reject
    ? { outcome: { outcome: 'selected', optionId: reject.optionId } }
    : { outcome: { outcome: 'cancelled' } };
}
