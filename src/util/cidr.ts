// CIDR lists for address-based access rules (VOICE_ADMIN_ALLOW). Pure: no I/O, no DNS, no headers.
import { BlockList, isIPv4, isIPv6 } from 'node:net';

export interface Cidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/**
 * "192.168.1.0/24", "::1/128", or a bare address (a single host). Null for anything else: no host names,
 * no zone ids ("fe80::1%eth0" names an interface, not a network), no prefix beyond the family's width.
 */
export function parseCidr(text: string): Cidr | null {
  const trimmed = text.trim();
  const slash = trimmed.indexOf('/');
  const address = slash < 0 ? trimmed : trimmed.slice(0, slash);
  const family = isIPv4(address) ? 'ipv4' : isIPv6(address) && !address.includes('%') ? 'ipv6' : null;
  if (!family) return null;
  const width = family === 'ipv4' ? 32 : 128;
  if (slash < 0) return { address, prefix: width, family };
  const prefixText = trimmed.slice(slash + 1);
  // Digits only: Number() would take "", " 8", "0x8" and "8e0".
  if (!/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = Number(prefixText);
  return prefix <= width ? { address, prefix, family } : null;
}

export function isCidr(text: string): boolean {
  return parseCidr(text) !== null;
}

/**
 * A TCP peer address as node reports it, reduced to what the rules compare: a zone id dropped, and an
 * IPv4-mapped IPv6 address (a dual-stack listener's view of an IPv4 peer) turned back into IPv4, so
 * "127.0.0.0/8" matches "::ffff:127.0.0.1".
 */
export function normalisePeer(
  address: string | undefined,
): { address: string; family: 'ipv4' | 'ipv6' } | null {
  if (!address) return null;
  const bare = address.split('%')[0]!;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  if (mapped && isIPv4(mapped[1]!)) return { address: mapped[1]!, family: 'ipv4' };
  if (isIPv4(bare)) return { address: bare, family: 'ipv4' };
  if (isIPv6(bare)) return { address: bare, family: 'ipv6' };
  return null;
}

export class CidrList {
  private readonly list = new BlockList();
  readonly size: number;

  /** Throws on the first entry that is not a CIDR, naming it (config validation reports it earlier). */
  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const cidr = parseCidr(entry);
      if (!cidr) throw new Error(`"${entry}" is not a CIDR (like 192.168.1.0/24 or ::1/128)`);
      this.list.addSubnet(cidr.address, cidr.prefix, cidr.family);
    }
    this.size = entries.length;
  }

  /** True when the address is inside one of the networks; an unparseable or missing address never is. */
  contains(address: string | undefined): boolean {
    const peer = normalisePeer(address);
    if (!peer) return false;
    // BlockList also matches an IPv4 peer against "::ffff:a.b.c.d/n" entries and the reverse.
    return this.list.check(peer.address, peer.family);
  }
}

/** A TCP peer on this machine (127.0.0.0/8, ::1, or either as an IPv4-mapped address). */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  if (address === '::1') return true;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}
