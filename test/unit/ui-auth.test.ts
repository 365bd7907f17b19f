// The dashboard's login helpers: cookie parsing, constant-time secret comparison, the cross-site check,
// bounded sessions with expiry, and the per-address login throttle.
import { describe, expect, it } from 'vitest';
import {
  clearedSessionCookie,
  crossSiteReason,
  LoginThrottle,
  parseCookies,
  SessionStore,
  sameSecret,
  sessionCookie,
} from '../../src/bridge/ui/auth.js';

describe('parseCookies', () => {
  it('reads pairs, trims, unquotes and decodes; the first of a repeated name wins', () => {
    const cookies = parseCookies(' a=1; deskbot_ui=abc ;b="quoted"; c=x%20y; a=2');
    expect(Object.fromEntries(cookies)).toEqual({ a: '1', deskbot_ui: 'abc', b: 'quoted', c: 'x y' });
  });

  it('skips malformed parts and broken escapes; no header is no cookies', () => {
    expect(parseCookies(undefined).size).toBe(0);
    expect(Object.fromEntries(parseCookies('novalue; =x; ok=1; bad=%E0%A4%A; empty='))).toEqual({
      ok: '1',
      empty: '',
    });
  });
});

describe('session cookie', () => {
  it('is HttpOnly, SameSite=Strict, scoped to /ui, and clearing expires it', () => {
    expect(sessionCookie('ff', 60)).toBe('deskbot_ui=ff; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=60');
    expect(clearedSessionCookie()).toContain('Max-Age=0');
  });
});

describe('sameSecret', () => {
  it('is true only for equal strings, whatever the lengths', () => {
    expect(sameSecret('pw', 'pw')).toBe(true);
    expect(sameSecret('pw', 'pw ')).toBe(false);
    expect(sameSecret('', 'pw')).toBe(false);
    expect(sameSecret('a'.repeat(1000), 'a')).toBe(false);
  });
});

describe('crossSiteReason', () => {
  const host = '192.168.1.5:8080';
  it('accepts same-origin requests and clients that send neither header', () => {
    expect(crossSiteReason({ host })).toBeNull();
    expect(
      crossSiteReason({ host, origin: 'http://192.168.1.5:8080', 'sec-fetch-site': 'same-origin' }),
    ).toBeNull();
    expect(crossSiteReason({ host, 'sec-fetch-site': 'none' })).toBeNull();
    expect(crossSiteReason({ host: 'Bot.local:8080', origin: 'http://bot.local:8080' })).toBeNull();
  });

  it('refuses another site, another port of the same host, an opaque origin and a bad Origin', () => {
    expect(crossSiteReason({ host, 'sec-fetch-site': 'cross-site' })).toMatch(/another site/);
    expect(crossSiteReason({ host, 'sec-fetch-site': 'same-site' })).toMatch(/another site/);
    expect(crossSiteReason({ host, origin: 'http://evil.example' })).toMatch(/another origin/);
    expect(crossSiteReason({ host, origin: 'http://192.168.1.5:8003' })).toMatch(/another origin/);
    expect(crossSiteReason({ host, origin: 'null' })).not.toBeNull();
    expect(crossSiteReason({ origin: 'http://192.168.1.5:8080' })).not.toBeNull();
  });
});

describe('SessionStore', () => {
  it('creates random sessions that expire after the TTL', () => {
    let now = 1_000;
    const store = new SessionStore({ ttlSec: 10, now: () => now });
    const a = store.create();
    const b = store.create();
    expect(a.id).toMatch(/^[0-9a-f]{64}$/);
    expect(a.id).not.toBe(b.id);
    expect(a.session.csrfToken).not.toBe(b.session.csrfToken);
    expect(store.get(a.id)).toBe(a.session);
    expect(store.get('f'.repeat(64))).toBeUndefined();
    expect(store.get('not-hex')).toBeUndefined();
    expect(store.get(undefined)).toBeUndefined();
    now += 10_000;
    expect(store.get(a.id)).toBeUndefined();
    expect(store.size).toBe(1); // the expired one read was dropped; b goes at the next create
    store.create();
    expect(store.size).toBe(1);
  });

  it('keeps at most maxSessions, forgetting the oldest; delete logs out', () => {
    const store = new SessionStore({ ttlSec: 3600, maxSessions: 3 });
    const ids = Array.from({ length: 5 }, () => store.create().id);
    expect(store.size).toBe(3);
    expect(store.get(ids[0])).toBeUndefined();
    expect(store.get(ids[4])).toBeDefined();
    store.delete(ids[4]);
    expect(store.get(ids[4])).toBeUndefined();
  });
});

describe('LoginThrottle', () => {
  it('locks an address after maxFailures for lockMs; others are unaffected; success clears', () => {
    let now = 0;
    const throttle = new LoginThrottle({ maxFailures: 3, lockMs: 60_000, now: () => now });
    throttle.failed('a');
    throttle.failed('a');
    expect(throttle.retryAfterMs('a')).toBe(0);
    throttle.failed('a');
    expect(throttle.retryAfterMs('a')).toBe(60_000);
    expect(throttle.retryAfterMs('b')).toBe(0);
    now += 60_000;
    expect(throttle.retryAfterMs('a')).toBe(0);
    throttle.failed('a'); // one more wrong guess after the wait locks again at once
    expect(throttle.retryAfterMs('a')).toBe(60_000);
    throttle.succeeded('a');
    expect(throttle.retryAfterMs('a')).toBe(0);
  });

  it('forgets failures older than the window and tracks a bounded number of addresses', () => {
    let now = 0;
    const throttle = new LoginThrottle({ maxFailures: 2, windowMs: 1000, maxAddresses: 2, now: () => now });
    throttle.failed('a');
    now += 2000;
    throttle.failed('a');
    expect(throttle.retryAfterMs('a')).toBe(0);
    throttle.failed('a');
    expect(throttle.retryAfterMs('a')).toBeGreaterThan(0);
    throttle.failed('b');
    throttle.failed('c'); // evicts a, the least recently touched
    expect(throttle.retryAfterMs('a')).toBe(0);
  });
});
