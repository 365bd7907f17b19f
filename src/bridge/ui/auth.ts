// Dashboard login. SPEC makes the dashboard the one non-loopback way to change smart_mode, so its mutations
// need a password login (session cookie) plus a per-session CSRF token, and refuse cross-site requests.
// Everything here is bounded: sessions and throttled addresses live in capped maps, so a LAN peer cannot
// grow memory by logging in or guessing repeatedly.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { LruMap } from '../perception/lru.js';

export const SESSION_COOKIE = 'deskbot_ui';
/** The cookie is scoped to the dashboard's own paths. */
export const COOKIE_PATH = '/ui';

/** Cookie header → name/value pairs. The first occurrence of a name wins; malformed pairs are skipped. */
export function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  if (!header) return cookies;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (!name || cookies.has(name)) continue;
    try {
      cookies.set(name, decodeURIComponent(value));
    } catch {
      // a broken %-escape: not a cookie we could have set
    }
  }
  return cookies;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Equality of two secrets in time independent of where they differ (and of their lengths: hashes first). */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}

export function sessionCookie(id: string, maxAgeSec: number): string {
  return `${SESSION_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=${COOKIE_PATH}; Max-Age=${maxAgeSec}`;
}

export function clearedSessionCookie(): string {
  return `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=${COOKIE_PATH}; Max-Age=0`;
}

/**
 * Why a request is not from the dashboard's own origin, or null when it is (or when a non-browser client
 * sent neither header). Browsers send Sec-Fetch-Site and, on POST, Origin; either one naming another site
 * is enough to refuse.
 */
export function crossSiteReason(headers: IncomingHttpHeaders): string | null {
  const fetchSite = headers['sec-fetch-site'];
  if (typeof fetchSite === 'string' && fetchSite !== 'same-origin' && fetchSite !== 'none') {
    return `request from another site (Sec-Fetch-Site: ${fetchSite.slice(0, 32)})`;
  }
  const origin = headers.origin;
  if (typeof origin === 'string') {
    const host = (headers.host ?? '').toLowerCase();
    let originHost: string;
    try {
      originHost = new URL(origin).host.toLowerCase();
    } catch {
      return 'request with an unreadable Origin';
    }
    if (!host || originHost !== host) return `request from another origin (${origin.slice(0, 100)})`;
  }
  return null;
}

export interface Session {
  csrfToken: string;
  expiresAtMs: number;
}

export interface SessionStoreOptions {
  ttlSec: number;
  /** Sessions kept at once; the oldest goes first (default 64). */
  maxSessions?: number;
  now?: () => number;
}

/** Server-side sessions. Keys are hashes of the cookie value, so a lookup leaks nothing about stored ids. */
export class SessionStore {
  private readonly sessions: LruMap<string, Session>;
  private readonly now: () => number;

  constructor(private readonly options: SessionStoreOptions) {
    this.sessions = new LruMap(Math.max(1, options.maxSessions ?? 64));
    this.now = options.now ?? Date.now;
  }

  create(): { id: string; session: Session } {
    this.purgeExpired();
    const id = randomBytes(32).toString('hex');
    const session = {
      csrfToken: randomBytes(32).toString('hex'),
      expiresAtMs: this.now() + this.options.ttlSec * 1000,
    };
    this.sessions.set(key(id), session);
    return { id, session };
  }

  /** The live session for a cookie value, or undefined (unknown or expired; an expired one is removed). */
  get(id: string | undefined): Session | undefined {
    if (!id || !/^[0-9a-f]{64}$/.test(id)) return undefined;
    const k = key(id);
    const session = this.sessions.peek(k);
    if (!session) return undefined;
    if (session.expiresAtMs <= this.now()) {
      this.sessions.delete(k);
      return undefined;
    }
    return session;
  }

  delete(id: string | undefined): void {
    if (id) this.sessions.delete(key(id));
  }

  get size(): number {
    return this.sessions.size;
  }

  private purgeExpired(): void {
    const now = this.now();
    for (const [k, session] of [...this.sessions.entries()]) {
      if (session.expiresAtMs <= now) this.sessions.delete(k);
    }
  }
}

function key(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

export interface LoginThrottleOptions {
  /** Failed logins allowed per address before it has to wait (default 5). */
  maxFailures?: number;
  /** Failures older than this are forgotten (default 15 min). */
  windowMs?: number;
  /** How long a throttled address waits (default 60 s). */
  lockMs?: number;
  /** Addresses tracked at once (default 1024). */
  maxAddresses?: number;
  now?: () => number;
}

interface Failures {
  count: number;
  firstAtMs: number;
  lockedUntilMs: number;
}

/** Per-address failed-login counter: after `maxFailures` failures the address waits `lockMs`. */
export class LoginThrottle {
  private readonly failures: LruMap<string, Failures>;
  private readonly maxFailures: number;
  private readonly windowMs: number;
  private readonly lockMs: number;
  private readonly now: () => number;

  constructor(options: LoginThrottleOptions = {}) {
    this.failures = new LruMap(Math.max(1, options.maxAddresses ?? 1024));
    this.maxFailures = Math.max(1, options.maxFailures ?? 5);
    this.windowMs = options.windowMs ?? 15 * 60_000;
    this.lockMs = options.lockMs ?? 60_000;
    this.now = options.now ?? Date.now;
  }

  /** Milliseconds the address must still wait before trying again; 0 = go ahead. */
  retryAfterMs(address: string): number {
    const entry = this.failures.peek(address);
    return entry ? Math.max(0, entry.lockedUntilMs - this.now()) : 0;
  }

  failed(address: string): void {
    const now = this.now();
    let entry = this.failures.get(address);
    if (!entry || now - entry.firstAtMs > this.windowMs)
      entry = { count: 0, firstAtMs: now, lockedUntilMs: 0 };
    entry.count++;
    if (entry.count >= this.maxFailures) {
      entry.lockedUntilMs = now + this.lockMs;
      // The next failure after the wait locks again at once.
      entry.count = this.maxFailures - 1;
    }
    this.failures.set(address, entry);
  }

  succeeded(address: string): void {
    this.failures.delete(address);
  }
}
