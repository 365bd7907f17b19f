// The CIDR matcher behind VOICE_ADMIN_ALLOW (DESIGN §3), and how the config reads VOICE_ADMIN_* (by table).
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { CidrList, isCidr, normalisePeer, parseCidr } from '../../src/util/cidr.js';
import { normalisePath } from '../../src/util/path-guard.js';
import { createAdminGuard } from '../../src/voice/admin-auth.js';

describe('parseCidr', () => {
  it.each([
    ['192.168.1.0/24', { address: '192.168.1.0', prefix: 24, family: 'ipv4' }],
    ['10.0.0.0/8', { address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
    ['0.0.0.0/0', { address: '0.0.0.0', prefix: 0, family: 'ipv4' }],
    ['203.0.113.7/32', { address: '203.0.113.7', prefix: 32, family: 'ipv4' }],
    ['203.0.113.7', { address: '203.0.113.7', prefix: 32, family: 'ipv4' }],
    [' 10.0.0.0/8 ', { address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
    ['::1/128', { address: '::1', prefix: 128, family: 'ipv6' }],
    ['::/0', { address: '::', prefix: 0, family: 'ipv6' }],
    ['fd00::/8', { address: 'fd00::', prefix: 8, family: 'ipv6' }],
    ['2001:db8::1', { address: '2001:db8::1', prefix: 128, family: 'ipv6' }],
    ['::ffff:127.0.0.0/104', { address: '::ffff:127.0.0.0', prefix: 104, family: 'ipv6' }],
  ])('%s parses', (text, expected) => {
    expect(parseCidr(text)).toEqual(expected);
    expect(isCidr(text)).toBe(true);
  });

  it.each([
    [''],
    ['/24'],
    ['10.0.0.0/'],
    ['10.0.0.0/33'],
    ['::/129'],
    ['10.0.0.0/-1'],
    ['10.0.0.0/8.5'],
    ['10.0.0.0/0x8'],
    ['10.0.0.0/ 8'],
    ['10.0.0.0/8/8'],
    ['10.0.0/8'],
    ['256.0.0.0/8'],
    ['010.0.0.0/8'],
    ['localhost'],
    ['example.com/24'],
    ['fe80::1%eth0/64'],
    ['10.0.0.0/8,192.168.0.0/16'],
    ['*'],
  ])('%j is refused', (text) => {
    expect(parseCidr(text)).toBeNull();
    expect(isCidr(text)).toBe(false);
  });
});

describe('CidrList.contains', () => {
  it.each([
    // [rules, peer, inside]
    [['127.0.0.0/8'], '127.0.0.1', true],
    [['127.0.0.0/8'], '127.255.255.254', true],
    [['127.0.0.0/8'], '128.0.0.1', false],
    [['192.168.1.0/24'], '192.168.1.77', true],
    [['192.168.1.0/24'], '192.168.2.1', false],
    [['192.168.1.1/24'], '192.168.1.200', true], // host bits in the rule are ignored
    [['203.0.113.7/32'], '203.0.113.7', true],
    [['203.0.113.7/32'], '203.0.113.8', false],
    [['203.0.113.7'], '203.0.113.7', true],
    [['0.0.0.0/0'], '198.51.100.1', true],
    [['0.0.0.0/0'], '::1', false], // an IPv4 rule says nothing about IPv6 peers
    // IPv4-mapped IPv6: what a dual-stack listener (::) reports for an IPv4 peer.
    [['127.0.0.0/8'], '::ffff:127.0.0.1', true],
    [['127.0.0.0/8'], '::FFFF:127.0.0.1', true],
    [['10.0.0.0/8'], '::ffff:127.0.0.1', false],
    [['::ffff:127.0.0.0/104'], '127.0.0.1', true],
    [['::1/128'], '::1', true],
    [['::1/128'], '::2', false],
    [['::1/128'], '127.0.0.1', false],
    [['fd00::/8'], 'fd12:3456::1', true],
    [['fd00::/8'], 'fe80::1', false],
    [['fe80::/10'], 'fe80::1%eth0', true], // a link-local peer carries its zone id
    [['::/0'], '2001:db8::1', true],
    [['10.0.0.0/8', '::1/128'], '::1', true],
    [['10.0.0.0/8', '::1/128'], '10.9.8.7', true],
    [['10.0.0.0/8', '::1/128'], '11.0.0.1', false],
    [[], '127.0.0.1', false],
    [['0.0.0.0/0'], undefined, false],
    [['0.0.0.0/0'], '', false],
    [['0.0.0.0/0'], 'not-an-address', false],
  ])('%j contains %j: %s', (rules, peer, inside) => {
    expect(new CidrList(rules).contains(peer)).toBe(inside);
  });

  it('names a bad entry', () => {
    expect(() => new CidrList(['10.0.0.0/8', '10.0.0.0/40'])).toThrow(/"10\.0\.0\.0\/40" is not a CIDR/);
  });

  it('normalises peers', () => {
    expect(normalisePeer('::ffff:10.1.2.3')).toEqual({ address: '10.1.2.3', family: 'ipv4' });
    expect(normalisePeer('fe80::1%lo')).toEqual({ address: 'fe80::1', family: 'ipv6' });
    expect(normalisePeer('::ffff:999.1.2.3')).toBeNull();
  });
});

describe('voice admin guard', () => {
  it.each([
    // [configured token, allow, peer, authorization, status]: a configured token is required from anyone.
    ['t0k', [], '127.0.0.1', undefined, 401],
    ['t0k', [], '127.0.0.1', 'Bearer t0k', 200],
    ['t0k', [], '127.0.0.1', 'bearer t0k', 200],
    ['t0k', [], '127.0.0.1', 'BEARER \tt0k ', 200],
    ['t0k', [], '127.0.0.1', 'Bearer T0K', 401],
    ['t0k', [], '127.0.0.1', 'Bearer t0k0', 401],
    ['t0k', [], '127.0.0.1', 'Bearer t0', 401],
    ['t0k', [], '127.0.0.1', 'Basic t0k', 401],
    ['t0k', [], '127.0.0.1', 't0k', 401],
    ['t0k', [], '127.0.0.1', 'Bearer', 401],
    ['t0k', [], '127.0.0.1', 'Bearer t0k extra', 401],
    // The address rule comes first: an outsider with the right token is still refused.
    ['t0k', ['10.0.0.0/8'], '127.0.0.1', 'Bearer t0k', 403],
    ['t0k', ['127.0.0.0/8'], '127.0.0.1', undefined, 401],
  ])('configured token %j allow %j from %s with %j → %i', (token, allow, peer, authorization, status) => {
    const verdict = createAdminGuard({ token, tokenRequired: true, allow })(peer, authorization);
    expect(verdict.ok ? 200 : verdict.status).toBe(status);
  });

  it.each([
    // [allow, peer, authorization, bridge-only route, status] with the generated token "gen" (nothing configured).
    [[], '127.0.0.1', undefined, false, 200],
    [[], '::1', undefined, false, 200],
    [[], '::ffff:127.0.0.1', undefined, false, 200],
    // Locked by default: another host needs the token.
    [[], '203.0.113.9', undefined, false, 401],
    [[], '192.168.1.20', 'Bearer nope', false, 401],
    [[], '192.168.1.20', 'Bearer gen', false, 200],
    // The toggles only through the bridge (the token holder), loopback included.
    [[], '127.0.0.1', undefined, true, 401],
    [[], '127.0.0.1', 'Bearer gen', true, 200],
    // VOICE_ADMIN_ALLOW alone replaces the loopback rule.
    [['10.0.0.0/8'], '127.0.0.1', undefined, false, 403],
    [['10.0.0.0/8'], '10.1.2.3', undefined, false, 200],
    [['127.0.0.0/8'], '::ffff:127.0.0.1', undefined, false, 200],
    [['10.0.0.0/8'], '10.1.2.3', undefined, true, 401],
  ])(
    'default: allow %j from %s with %j (bridge-only %s) → %i',
    (allow, peer, authorization, bridgeOnly, status) => {
      const verdict = createAdminGuard({ token: 'gen', tokenRequired: false, allow })(peer, authorization, {
        bridgeOnly,
      });
      expect(verdict.ok ? 200 : verdict.status).toBe(status);
    },
  );
});

describe('normalisePath (what the router matches)', () => {
  it.each([
    ['/device/admin/devices?x=1', '/device/admin/devices'],
    ['//device//admin/devices', '/device/admin/devices'],
    ['/device/%61dmin/devices', '/device/admin/devices'],
    ['/DEVICE/Admin/x', '/device/admin/x'],
    ['/device/admin%zz', '/device/admin%zz'],
  ])('%s → %s', (url, path) => {
    expect(normalisePath(url)).toBe(path);
  });
});

describe('VOICE_ADMIN_* in the config', () => {
  const load = (env: Record<string, string>) => loadConfig({ env, file: '/dev/null' });

  it('is off by default', () => {
    expect(load({}).voice_admin).toEqual({ token: '', allow: [] });
  });

  it('reads the token and a comma-separated CIDR list', () => {
    const config = load({
      VOICE_ADMIN_TOKEN: 's3cret',
      VOICE_ADMIN_ALLOW: '192.168.1.0/24, ::1/128,,127.0.0.1',
    });
    expect(config.voice_admin).toEqual({
      token: 's3cret',
      allow: ['192.168.1.0/24', '::1/128', '127.0.0.1'],
    });
  });

  it('refuses a bad CIDR in the environment, naming it', () => {
    expect(() => load({ VOICE_ADMIN_ALLOW: '10.0.0.0/8,10.0.0.0/99' })).toThrow(ConfigError);
    expect(() => load({ VOICE_ADMIN_ALLOW: '10.0.0.0/8,10.0.0.0/99' })).toThrow(
      /VOICE_ADMIN_ALLOW: "10\.0\.0\.0\/99" is not a CIDR/,
    );
  });

  it('refuses a bad CIDR in the file or overrides, naming the key and value', () => {
    expect(() =>
      loadConfig({ env: {}, file: '/dev/null', overrides: { voice_admin: { allow: ['lan'] } } }),
    ).toThrow(/voice_admin\.allow\.0.*"lan" is not a CIDR/);
  });
});
