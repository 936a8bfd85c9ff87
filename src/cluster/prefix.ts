/**
 * Addresses and prefixes as BigInt, for the cluster layer. `src/ipam/` sits above `src/cluster/` (it
 * may use this layer, not the reverse), so the few operations the cluster needs live here: parse,
 * canonical text, containment, and the enumeration of node-sized subnets of a cluster CIDR.
 *
 * Canonical text is the one `src/ipam/ip.ts` writes: dotted decimal for IPv4, RFC 5952 for IPv6
 * (the WHATWG URL host serialiser produces exactly that), so both layers agree byte for byte on the
 * CIDR strings they store and compare.
 */
import { isIP } from 'node:net';

export type IpFamily = 4 | 6;

export interface Address {
  family: IpFamily;
  value: bigint;
}

/** A prefix with its host bits zero; `text` is canonical. */
export interface Prefix {
  family: IpFamily;
  network: bigint;
  length: number;
  text: string;
}

export function familyBits(family: IpFamily): 32 | 128 {
  return family === 4 ? 32 : 128;
}

const V4_OCTET = /^(0|[1-9][0-9]{0,2})$/;

/** Parses a plain address (no zone, no brackets, no leading zeros in IPv4); undefined when it is not one. */
export function parseAddress(text: string): Address | undefined {
  if (typeof text !== 'string' || text.includes('%')) return undefined;
  const family = isIP(text);
  if (family === 4) {
    const octets = text.split('.');
    if (!octets.every((o) => V4_OCTET.test(o))) return undefined;
    return { family, value: octets.reduce((v, o) => (v << 8n) | BigInt(o), 0n) };
  }
  if (family !== 6) return undefined;
  // The URL host parser turns any valid spelling (embedded IPv4 included) into compressed hex groups.
  const host = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  const [head = '', tail] = host.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = new Array<string>(8 - headGroups.length - tailGroups.length).fill('0');
  const groups = tail === undefined ? headGroups : [...headGroups, ...zeros, ...tailGroups];
  return { family, value: groups.reduce((v, g) => (v << 16n) | BigInt(`0x${g}`), 0n) };
}

export function formatAddress(family: IpFamily, value: bigint): string {
  if (family === 4) {
    return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 0xffn)).join('.');
  }
  const groups: string[] = [];
  for (let s = 112n; s >= 0n; s -= 16n) groups.push(((value >> s) & 0xffffn).toString(16));
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/** Canonical text of an address, or undefined when `text` is not one. */
export function canonicalAddress(text: string): string | undefined {
  const a = parseAddress(text);
  return a === undefined ? undefined : formatAddress(a.family, a.value);
}

function hostMask(family: IpFamily, length: number): bigint {
  return (1n << BigInt(familyBits(family) - length)) - 1n;
}

function makePrefix(family: IpFamily, network: bigint, length: number): Prefix {
  return { family, network, length, text: `${formatAddress(family, network)}/${length}` };
}

/**
 * Parses "10.244.0.0/16" or "fd00:10:244::/48". Returns a reason instead of throwing so that each
 * caller can name its own field in the error.
 */
export function parsePrefix(text: string): Prefix | { error: string } {
  if (typeof text !== 'string') return { error: 'not a string' };
  const slash = text.indexOf('/');
  if (slash < 0) return { error: 'missing "/prefix-length"' };
  const addr = parseAddress(text.slice(0, slash));
  if (addr === undefined) return { error: 'not an IPv4 or IPv6 address' };
  const lengthText = text.slice(slash + 1);
  const bits = familyBits(addr.family);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(lengthText) || Number(lengthText) > bits) {
    return { error: `prefix length must be an integer from 0 to ${bits}` };
  }
  const length = Number(lengthText);
  const mask = hostMask(addr.family, length);
  if ((addr.value & mask) !== 0n) {
    const network = makePrefix(addr.family, addr.value & ~mask, length).text;
    return { error: `host bits are set (did you mean ${network}?)` };
  }
  return makePrefix(addr.family, addr.value, length);
}

export function isPrefix(p: Prefix | { error: string }): p is Prefix {
  return !('error' in p);
}

/** Whether `inner` lies entirely inside `outer` (same family, longer or equal prefix, same leading bits). */
export function prefixContains(outer: Prefix, inner: Prefix): boolean {
  if (outer.family !== inner.family || inner.length < outer.length) return false;
  return (inner.network & ~hostMask(outer.family, outer.length)) === outer.network;
}

/** Two prefixes of one family overlap exactly when one contains the other. */
export function prefixesOverlap(a: Prefix, b: Prefix): boolean {
  return prefixContains(a, b) || prefixContains(b, a);
}

/** How many `/length` subnets `outer` holds; `length` must be >= outer.length. */
export function subnetCount(outer: Prefix, length: number): bigint {
  return 1n << BigInt(length - outer.length);
}

/**
 * Every `/length` subnet of `outer`, lowest first. Lazy: a /32 split into /64s is never materialised,
 * so a caller that stops at the first free one costs as many steps as subnets it skipped.
 */
export function* subnets(outer: Prefix, length: number): Generator<Prefix, void, undefined> {
  const step = 1n << BigInt(familyBits(outer.family) - length);
  const count = subnetCount(outer, length);
  for (let i = 0n; i < count; i++) yield makePrefix(outer.family, outer.network + i * step, length);
}
