// Per-device WebSocket tokens: HMAC-SHA256 over "deviceId.expiry", handed out by OTA when auth is on.
import { createHmac, timingSafeEqual } from 'node:crypto';

export function issueDeviceToken(
  secret: string,
  deviceId: string,
  ttlSec: number,
  nowMs = Date.now(),
): string {
  const expiry = Math.floor(nowMs / 1000) + ttlSec;
  const body = Buffer.from(`${deviceId}.${expiry}`).toString('base64url');
  return `${body}.${sign(secret, body)}`;
}

export type TokenCheck =
  | { ok: true }
  | { ok: false; reason: 'malformed' | 'bad_signature' | 'expired' | 'wrong_device' };

export function verifyDeviceToken(
  secret: string,
  token: string,
  deviceId: string,
  nowMs = Date.now(),
): TokenCheck {
  const [body, signature, extra] = token.split('.');
  if (!body || !signature || extra !== undefined) return { ok: false, reason: 'malformed' };
  const expected = Buffer.from(sign(secret, body));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    return { ok: false, reason: 'bad_signature' };
  }
  const decoded = Buffer.from(body, 'base64url').toString();
  const dot = decoded.lastIndexOf('.');
  const tokenDevice = decoded.slice(0, dot);
  const expiry = Number(decoded.slice(dot + 1));
  if (dot < 0 || !Number.isFinite(expiry)) return { ok: false, reason: 'malformed' };
  if (tokenDevice !== deviceId) return { ok: false, reason: 'wrong_device' };
  if (expiry * 1000 <= nowMs) return { ok: false, reason: 'expired' };
  return { ok: true };
}

function sign(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('base64url');
}
