// The device boot endpoint: GET|POST /device/ota/, POST /device/ota/activate and firmware downloads.
import { createReadStream } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  activateBodySchema,
  normaliseDeviceId,
  type OtaRequestBody,
  type OtaResponse,
  otaRequestBodySchema,
} from '../protocol/index.js';
import { HttpError } from '../util/http-error.js';
import type { ActivationService } from './activation.js';
import { issueDeviceToken } from './device-token.js';
import { decideFirmware, type FirmwareStore } from './firmware-store.js';

/** The boot routes a device (or a browser client) calls; they get CORS (cors.ts). */
export const OTA_ROUTES = ['/device/ota/', '/device/ota/activate', '/device/ota/firmware/:file'] as const;

export interface OtaRouteOptions {
  firmware: FirmwareStore;
  activation: ActivationService;
  forceFirmware: boolean;
  /** Configured WebSocket URL; empty = derived from the request's Host and wsPort. */
  websocketUrl: string;
  publicHost: string;
  wsPort: () => number;
  httpPort: () => number;
  wsProtocolVersion: number;
  timezoneOffsetMin: number | null;
  auth?: { secret: string; ttlSec: number };
}

export function registerOtaRoutes(app: FastifyInstance, options: OtaRouteOptions): void {
  const handler = async (request: FastifyRequest) => {
    const deviceId = readDeviceId(request);
    const body = readBody(request);
    const host = publicHostOf(request, options.publicHost);
    const response: OtaResponse = {
      server_time: {
        timestamp: Date.now(),
        timezone_offset: options.timezoneOffsetMin ?? -new Date().getTimezoneOffset(),
      },
      websocket: {
        url: options.websocketUrl || `ws://${host}:${options.wsPort()}/device/v1/`,
        ...(options.auth
          ? { token: issueDeviceToken(options.auth.secret, deviceId, options.auth.ttlSec) }
          : {}),
        ...(options.wsProtocolVersion ? { version: options.wsProtocolVersion } : {}),
      },
    };
    const [uaName, uaVersion] = String(request.headers['user-agent'] ?? '').split('/');
    const board = stringField(body.board?.type) ?? uaName ?? body.application?.name ?? '';
    const current = body.application?.version ?? uaVersion;
    const decision = decideFirmware(current, options.firmware.latestFor(board), options.forceFirmware);
    if (decision.offer) {
      response.firmware = {
        version: decision.image.version,
        url: `http://${host}:${options.httpPort()}/device/ota/firmware/${decision.image.file}`,
        force: decision.force ? 1 : 0,
      };
    }
    if (request.headers['activation-version'] === '2') {
      const pending = options.activation.challengeFor(deviceId);
      if (pending) {
        response.activation = {
          message: 'Activate this robot with deskbot',
          code: pending.code,
          challenge: pending.challenge,
          timeout_ms: 30_000,
        };
      }
    }
    return response;
  };
  app.get('/device/ota/', handler);
  app.post('/device/ota/', handler);

  app.post('/device/ota/activate', async (request, reply) => {
    const deviceId = readDeviceId(request);
    const parsed = activateBodySchema.safeParse(request.body ?? {});
    if (!parsed.success) throw new HttpError(400, 'invalid_body', describe(parsed.error.issues[0]));
    const outcome = await options.activation.activate(deviceId, parsed.data.hmac);
    if (outcome === 'refused')
      throw new HttpError(403, 'activation_refused', 'the HMAC does not answer the challenge');
    if (outcome === 'waiting') return reply.status(202).send({ ok: false, status: 'waiting' });
    return { ok: true, status: outcome };
  });

  app.get<{ Params: { file: string } }>('/device/ota/firmware/:file', async (request, reply) => {
    const path = options.firmware.pathOf(request.params.file);
    if (!path)
      throw new HttpError(404, 'firmware_not_found', `no firmware image named ${request.params.file}`);
    return reply.type('application/octet-stream').send(createReadStream(path));
  });
}

function readDeviceId(request: FastifyRequest): string {
  const query = request.query as Record<string, unknown> | undefined;
  const raw = request.headers['device-id'] ?? query?.['device-id'] ?? query?.device_id;
  if (typeof raw !== 'string' || raw === '') {
    throw new HttpError(400, 'missing_device_id', 'the Device-Id header is required');
  }
  const deviceId = normaliseDeviceId(raw);
  if (!deviceId) throw new HttpError(400, 'bad_device_id', 'Device-Id must be a MAC like aa:bb:cc:dd:ee:ff');
  return deviceId;
}

function readBody(request: FastifyRequest): OtaRequestBody {
  if (request.method === 'GET' || request.body === undefined || request.body === null) return {};
  if (typeof request.body !== 'object' || Array.isArray(request.body)) {
    throw new HttpError(400, 'invalid_body', 'the boot request body must be a JSON object');
  }
  const parsed = otaRequestBodySchema.safeParse(request.body);
  if (!parsed.success) throw new HttpError(400, 'invalid_body', describe(parsed.error.issues[0]));
  return parsed.data;
}

function describe(issue: { path: PropertyKey[]; message: string } | undefined): string {
  if (!issue) return 'invalid body';
  return `${issue.path.map(String).join('.') || 'body'}: ${issue.message}`;
}

function stringField(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** Host name for URLs handed to the device: configured, else the one the device reached us by. */
export function publicHostOf(request: FastifyRequest, configured: string): string {
  if (configured) return configured;
  const host = request.headers.host ?? 'localhost';
  return host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
}
