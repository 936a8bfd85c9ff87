/**
 * IP addresses and prefixes: the one module every layer uses for them.
 *
 * An address is `{ family, value }` with the value as a BigInt, or its network-order bytes. Text
 * goes in strictly (dotted decimal without leading zeros, which some tools read as octal; IPv6 with
 * at most one "::" and an IPv4 tail only at the end; no zone index, no brackets) and comes out in one
 * canonical form, RFC 5952: lower-case hex without leading zeros, the longest run of two or more zero
 * groups written "::" (the first on a tie), and IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible
 * (::a.b.c.d) addresses in mixed notation. That is exactly what glibc's inet_ntop prints, so text from
 * here compares equal to `ip -j`, tcpdump and Node's own output.
 */
import { InternalError, InvalidConfigError } from './errors.js';

export type IpFamily = 4 | 6;

export interface IpValue {
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

/** Number of bits in an address of the family. */
export function addressBits(family: IpFamily): 32 | 128 {
  return family === 4 ? 32 : 128;
}

const IPV6_GROUP = /^[0-9a-fA-F]{1,4}$/;
const PREFIX_LENGTH = /^(0|[1-9][0-9]{0,2})$/;

/**
 * Dotted-quad text: four octets 0-255 in decimal without leading zeros, as a number (below 2^32).
 * A character loop, without splitting or bigint arithmetic: a join of thousands of peers parses
 * their addresses and CIDRs several times each (record check, routes, netlink requests).
 */
function ipv4Number(text: string): number | undefined {
  if (text.length > 15) return undefined;
  let value = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e /* . */) {
      if (digits === 0 || dots === 3) return undefined;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
      continue;
    }
    if (c < 0x30 || c > 0x39) return undefined;
    if (digits === 1 && octet === 0) return undefined; // a leading zero
    octet = octet * 10 + (c - 0x30);
    digits++;
    if (octet > 255) return undefined;
  }
  if (dots !== 3 || digits === 0) return undefined;
  return value * 256 + octet;
}

function parseIpv4(text: string): bigint | undefined {
  const n = ipv4Number(text);
  return n === undefined ? undefined : BigInt(n);
}

/** The groups on one side of "::"; an embedded IPv4 address is allowed only as the very last piece. */
function parseGroups(text: string, allowIpv4Tail: boolean): number[] | undefined {
  if (text === '') return [];
  const pieces = text.split(':');
  const groups: number[] = [];
  for (const [i, piece] of pieces.entries()) {
    if (allowIpv4Tail && i === pieces.length - 1 && piece.includes('.')) {
      const v4 = parseIpv4(piece);
      if (v4 === undefined) return undefined;
      groups.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
    } else if (IPV6_GROUP.test(piece)) {
      groups.push(Number.parseInt(piece, 16));
    } else {
      return undefined;
    }
  }
  return groups;
}

function parseIpv6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  let groups: number[];
  if (halves.length === 1) {
    const all = parseGroups(text, true);
    if (all === undefined || all.length !== 8) return undefined;
    groups = all;
  } else {
    const head = parseGroups(halves[0] ?? '', false);
    const tail = parseGroups(halves[1] ?? '', true);
    // "::" stands for at least one zero group.
    if (head === undefined || tail === undefined || head.length + tail.length > 7) return undefined;
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  }
  let value = 0n;
  for (const group of groups) value = (value << 16n) | BigInt(group);
  return value;
}

/** Parses an IPv4 or IPv6 address; undefined when `text` is not one (see the file comment). */
export function parseIp(text: string): IpValue | undefined {
  if (typeof text !== 'string') return undefined;
  if (text.includes(':')) {
    const value = parseIpv6(text);
    return value === undefined ? undefined : { family: 6, value };
  }
  const value = parseIpv4(text);
  return value === undefined ? undefined : { family: 4, value };
}

/** Like `parseIp`, but throws InvalidConfigError naming `what` and the value. */
export function parseIpOrThrow(text: string, what = 'IP address'): IpValue {
  const ip = parseIp(text);
  if (ip === undefined) throw new InvalidConfigError(`invalid ${what} ${JSON.stringify(text)}`);
  return ip;
}

/** The family of a plain address, or undefined when it is not one. */
export function ipFamily(text: string): IpFamily | undefined {
  return parseIp(text)?.family;
}

/** The family of `address/length` (host bits allowed), or undefined when malformed. */
export function cidrFamily(text: string): IpFamily | undefined {
  return parseAddressWithPrefix(text)?.family;
}

/** Canonical text of an address value (see the file comment). */
export function formatIp(family: IpFamily, value: bigint): string {
  if (family === 4) {
    const n = Number(BigInt.asUintN(32, value));
    return `${n >>> 24}.${(n >>> 16) & 0xff}.${(n >>> 8) & 0xff}.${n & 0xff}`;
  }
  const groups: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(Number((value >> shift) & 0xffffn));
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  // Mixed notation: ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible), as inet_ntop prints them.
  if (bestStart === 0 && (bestLength === 6 || (bestLength === 5 && groups[5] === 0xffff))) {
    const v4 = formatIp(4, value & 0xffffffffn);
    return bestLength === 6 ? `::${v4}` : `::ffff:${v4}`;
  }
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

/** The canonical text of `text`; throws InvalidConfigError when it is not an address. */
export function canonicalIp(text: string, what?: string): string {
  const ip = parseIpOrThrow(text, what);
  return formatIp(ip.family, ip.value);
}

/** The canonical text of `text`, or undefined when it is not an address. */
export function normalizeIp(text: string): string | undefined {
  const ip = parseIp(text);
  return ip === undefined ? undefined : formatIp(ip.family, ip.value);
}

// --- Bytes (network order), the form the kernel and frames carry. ---

/** The 4 or 16 network-order bytes of an address value. */
export function ipValueToBytes(ip: IpValue): Buffer {
  const out = Buffer.alloc(ip.family === 4 ? 4 : 16);
  let v = ip.value;
  for (let i = out.length - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/**
 * The bytes of address text: 4 or 16, or exactly of `family` when given. Throws InvalidConfigError
 * naming the family wanted.
 */
export function ipToBytes(text: string, family?: IpFamily): Buffer {
  const ip = parseIp(text);
  if (ip === undefined || (family !== undefined && ip.family !== family)) {
    const kind = family === undefined ? 'IP' : `IPv${family}`;
    throw new InvalidConfigError(`invalid ${kind} address "${text}"`);
  }
  return ipValueToBytes(ip);
}

/** The address in `length` (4 or 16) bytes at `offset`. */
export function ipValueFromBytes(bytes: Uint8Array, offset = 0, length = bytes.length - offset): IpValue {
  if (
    (length !== 4 && length !== 16) ||
    !Number.isInteger(offset) ||
    offset < 0 ||
    offset + length > bytes.length
  ) {
    throw new InternalError(
      `an IP address is 4 or 16 bytes: ${length} at offset ${offset} of ${bytes.length}`,
    );
  }
  let value = 0n;
  for (let i = offset; i < offset + length; i++) value = (value << 8n) | BigInt(bytes[i] ?? 0);
  return { family: length === 4 ? 4 : 6, value };
}

/** Canonical text of the 4 or 16 bytes at `offset` (all of `bytes` by default): inet_ntop. */
export function formatIpBytes(bytes: Uint8Array, offset = 0, length = bytes.length - offset): string {
  const ip = ipValueFromBytes(bytes, offset, length);
  return formatIp(ip.family, ip.value);
}

// --- Prefixes. ---

/** The host masks of every prefix length, per family: constants, computed once. */
const HOST_MASKS: Record<IpFamily, readonly bigint[]> = {
  4: Array.from({ length: 33 }, (_, len) => (1n << BigInt(32 - len)) - 1n),
  6: Array.from({ length: 129 }, (_, len) => (1n << BigInt(128 - len)) - 1n),
};

function hostMask(family: IpFamily, length: number): bigint {
  return HOST_MASKS[family][length] ?? (1n << BigInt(addressBits(family) - length)) - 1n;
}

/** The prefix of `length` bits that holds `ip` (its host bits cleared). */
export function prefixOf(ip: IpValue, length: number): Prefix {
  return makePrefix(ip.family, ip.value & ~hostMask(ip.family, length), length);
}

/** A prefix from a network value whose host bits are zero (the caller makes sure). */
export function makePrefix(family: IpFamily, network: bigint, length: number): Prefix {
  return { family, network, length, text: `${formatIp(family, network)}/${length}` };
}

/** `address/length` with the address's host bits kept, as `ip addr add` takes it. */
export interface AddressWithPrefix extends IpValue {
  length: number;
}

/** Parses `address/length` keeping host bits; undefined when malformed. */
export function parseAddressWithPrefix(text: string): AddressWithPrefix | undefined {
  if (typeof text !== 'string') return undefined;
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIp(text.slice(0, slash));
  const lengthText = text.slice(slash + 1);
  if (ip === undefined || !PREFIX_LENGTH.test(lengthText)) return undefined;
  const length = Number(lengthText);
  return length <= addressBits(ip.family) ? { ...ip, length } : undefined;
}

/**
 * Parses a prefix, "10.244.0.0/16" or "fd00:10:244::/48". Returns a reason instead of throwing, so
 * that each caller names its own field in the error.
 */
export function parsePrefix(text: string): Prefix | { error: string } {
  if (typeof text !== 'string') return { error: 'not a string' };
  const slash = text.indexOf('/');
  if (slash < 0) return { error: 'missing "/prefix-length"' };
  const ip = parseIp(text.slice(0, slash));
  if (ip === undefined) return { error: 'not an IPv4 or IPv6 address' };
  const lengthText = text.slice(slash + 1);
  const bits = addressBits(ip.family);
  if (!PREFIX_LENGTH.test(lengthText) || Number(lengthText) > bits) {
    return { error: `prefix length must be an integer from 0 to ${bits}` };
  }
  const length = Number(lengthText);
  const mask = hostMask(ip.family, length);
  if ((ip.value & mask) !== 0n) {
    return {
      error: `host bits are set (did you mean ${makePrefix(ip.family, ip.value & ~mask, length).text}?)`,
    };
  }
  return makePrefix(ip.family, ip.value, length);
}

export function isPrefix(p: Prefix | { error: string }): p is Prefix {
  return !('error' in p);
}

/** Like `parsePrefix`, but throws InvalidConfigError naming `what`, the value and the reason. */
export function parsePrefixOrThrow(text: string, what = 'CIDR'): Prefix {
  const p = parsePrefix(text);
  if (!isPrefix(p)) throw new InvalidConfigError(`invalid ${what} ${JSON.stringify(text)}: ${p.error}`);
  return p;
}

/** The number of addresses in the prefix. */
export function prefixSize(p: Prefix): bigint {
  return 1n << BigInt(addressBits(p.family) - p.length);
}

/** Whether the address lies inside the prefix; an address of the other family never does. */
export function prefixContainsIp(p: Prefix, ip: IpValue): boolean {
  return ip.family === p.family && ip.value >= p.network && ip.value < p.network + prefixSize(p);
}

/** Whether `inner` lies entirely inside `outer` (same family, equal or longer prefix, same leading bits). */
export function prefixContains(outer: Prefix, inner: Prefix): boolean {
  if (outer.family !== inner.family || inner.length < outer.length) return false;
  return (inner.network & ~hostMask(outer.family, outer.length)) === outer.network;
}

/** Two prefixes overlap exactly when one contains the other. */
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
  const step = 1n << BigInt(addressBits(outer.family) - length);
  const count = subnetCount(outer, length);
  for (let i = 0n; i < count; i++) yield makePrefix(outer.family, outer.network + i * step, length);
}

/** Dotted-quad text straight to its 4 bytes, without bigints; undefined for anything else (IPv6 included). */
function ipv4Bytes(text: string): Uint8Array | undefined {
  const n = ipv4Number(text);
  if (n === undefined) return undefined;
  return Uint8Array.of(n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

/** The family and bytes of address text; throws InvalidConfigError when it is not an address. */
export function parseIpBytes(text: string): { family: IpFamily; bytes: Uint8Array } {
  const v4 = ipv4Bytes(text);
  if (v4 !== undefined) return { family: 4, bytes: v4 };
  const ip = parseIpOrThrow(text);
  return { family: ip.family, bytes: new Uint8Array(ipValueToBytes(ip)) };
}

/** Bytes in an IPv4 and in an IPv6 address. */
export const IPV4_LEN = 4;
export const IPV6_LEN = 16;
