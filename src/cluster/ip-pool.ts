/**
 * IP pools (flexible IPAM): addresses on a subnet the pods share with the underlay (or a VLAN of it),
 * handed out cluster-wide. The shape follows Antrea's IPPool: ranges (CIDR or start-end), the
 * subnet's gateway and prefix length, an optional VLAN (0 = untagged).
 *
 *   {name: blue, ranges: ["172.30.0.100-172.30.0.123"], subnet: {gateway: 172.30.0.254, prefixLength: 24}, vlan: 0}
 */

import { isDnsLabel } from '../base/dns-label.js';
import { InvalidConfigError, type PodwireError } from '../base/errors.js';
import { addressBits, formatIp, type IpFamily, type Prefix, parseIp, prefixSize } from '../base/ip.js';

export interface IpPool {
  /** A DNS-1123 label: it names etcd keys and the CNI_ARGS value PODWIRE_POOL. */
  name: string;
  /** Canonical text: "a.b.c.d/n" or "first-last". */
  ranges: string[];
  subnet: { gateway: string; prefixLength: number };
  /** 802.1Q VLAN ID; 0 = untagged. */
  vlan: number;
}

/** A range as numbers: every address from `first` to `last`, both included. */
export interface PoolSpan {
  first: bigint;
  last: bigint;
}

export interface ParsedPool {
  pool: IpPool;
  family: IpFamily;
  spans: PoolSpan[];
  /** The subnet's network and (IPv4) broadcast, and the gateway: never handed out. */
  reserved: Set<bigint>;
  /** How many addresses pods can receive. */
  size: bigint;
}

const KEYS = new Set(['name', 'ranges', 'subnet', 'vlan']);

function bad(where: string, key: string, why: string): PodwireError {
  return new InvalidConfigError(`${where}: ${key}: ${why}`);
}

/** Validates a pool (from the CLI or the store); errors name the key, prefixed with `where`. */
export function parseIpPool(value: unknown, where: string): ParsedPool {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw bad(where, '(pool)', 'must be a mapping');
  const obj = value as Record<string, unknown>;
  for (const k of Object.keys(obj)) if (!KEYS.has(k)) throw bad(where, k, 'unknown key');
  const name = obj.name;
  if (!isDnsLabel(name))
    throw bad(
      where,
      'name',
      `${JSON.stringify(name)} must be a DNS-1123 label (lower-case letters, digits, "-")`,
    );
  const subnet = obj.subnet as Record<string, unknown> | undefined;
  if (subnet === null || typeof subnet !== 'object')
    throw bad(where, 'subnet', 'must be {gateway, prefixLength}');
  const gw = typeof subnet.gateway === 'string' ? parseIp(subnet.gateway) : undefined;
  if (!gw) throw bad(where, 'subnet.gateway', `${JSON.stringify(subnet.gateway)} is not an IP address`);
  const bits = addressBits(gw.family);
  const plen = subnet.prefixLength;
  if (typeof plen !== 'number' || !Number.isInteger(plen) || plen < 1 || plen > bits - 2)
    throw bad(where, 'subnet.prefixLength', `must be an integer from 1 to ${bits - 2}`);
  const hostBits = BigInt(bits - plen);
  const network = (gw.value >> hostBits) << hostBits;
  const top = network + (1n << hostBits) - 1n;
  const reserved = new Set([network, gw.value, ...(gw.family === 4 ? [top] : [])]);
  const vlan = obj.vlan ?? 0;
  if (typeof vlan !== 'number' || !Number.isInteger(vlan) || vlan < 0 || vlan > 4094)
    throw bad(where, 'vlan', `${JSON.stringify(vlan)} must be an integer from 0 (untagged) to 4094`);
  if (!Array.isArray(obj.ranges) || obj.ranges.length === 0)
    throw bad(where, 'ranges', 'must be a non-empty list of CIDRs or start-end ranges');
  const spans: PoolSpan[] = [];
  const ranges: string[] = [];
  for (const [i, text] of (obj.ranges as unknown[]).entries()) {
    const key = `ranges[${i}]`;
    if (typeof text !== 'string') throw bad(where, key, 'must be a string');
    const span = parseSpan(text, gw.family);
    if (typeof span === 'string') throw bad(where, key, `${JSON.stringify(text)}: ${span}`);
    if (span.first < network || span.last > top)
      throw bad(where, key, `${text} is not inside the subnet ${formatIp(gw.family, network)}/${plen}`);
    for (const other of spans)
      if (span.first <= other.last && other.first <= span.last)
        throw bad(where, key, `${text} overlaps another range`);
    spans.push(span);
    ranges.push(
      text.includes('/') ? text : `${formatIp(gw.family, span.first)}-${formatIp(gw.family, span.last)}`,
    );
  }
  let size = 0n;
  for (const s of spans) {
    size += s.last - s.first + 1n;
    for (const r of reserved) if (r >= s.first && r <= s.last) size--;
  }
  if (size === 0n)
    throw bad(where, 'ranges', 'leave no address to hand out (network, gateway and broadcast are excluded)');
  const pool: IpPool = {
    name,
    ranges,
    subnet: { gateway: formatIp(gw.family, gw.value), prefixLength: plen },
    vlan,
  };
  return { pool, family: gw.family, spans, reserved, size };
}

function parseSpan(text: string, family: IpFamily): PoolSpan | string {
  if (text.includes('/')) {
    const [addr, len] = text.split('/');
    const ip = parseIp(addr ?? '');
    const n = Number(len);
    const bits = addressBits(family);
    if (!ip || ip.family !== family) return `not an IPv${family} CIDR`;
    if (!Number.isInteger(n) || n < 0 || n > bits || String(n) !== len) return 'bad prefix length';
    const host = BigInt(bits - n);
    if ((ip.value >> host) << host !== ip.value) return 'has host bits set';
    return { first: ip.value, last: ip.value + (1n << host) - 1n };
  }
  const [a, b, ...rest] = text.split('-');
  const first = parseIp(a ?? '');
  const last = parseIp(b ?? '');
  if (rest.length > 0 || !first || !last) return 'must be a CIDR or START-END';
  if (first.family !== family || last.family !== family) return `not IPv${family} (the gateway's family)`;
  if (last.value < first.value) return 'END is before START';
  return { first: first.value, last: last.value };
}

/** Whether `ip` is one the pool hands out. */
export function poolContains(p: ParsedPool, ip: bigint): boolean {
  return !p.reserved.has(ip) && p.spans.some((s) => ip >= s.first && ip <= s.last);
}

/** Every address the pool hands out, in range order. Pools are small (a subnet shared with hosts). */
export function* poolAddresses(p: ParsedPool): Generator<bigint> {
  for (const s of p.spans) for (let ip = s.first; ip <= s.last; ip++) if (!p.reserved.has(ip)) yield ip;
}

/**
 * The first range of the pool that overlaps one of `cidrs` (pod CIDRs), with that CIDR. An address
 * there would be a pool pod's on the underlay and a plain pod's on a node at once: two pods with one
 * address, and the node's routes and guards taking one for the other.
 */
export function poolOverlap(
  p: ParsedPool,
  cidrs: readonly Prefix[],
): { range: string; cidr: Prefix } | undefined {
  for (const cidr of cidrs) {
    if (cidr.family !== p.family) continue;
    const last = cidr.network + prefixSize(cidr) - 1n;
    for (const [i, s] of p.spans.entries())
      if (s.first <= last && cidr.network <= s.last) return { range: p.pool.ranges[i] as string, cidr };
  }
  return undefined;
}
