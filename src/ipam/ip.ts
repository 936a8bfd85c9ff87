/**
 * IP address text <-> BigInt. One representation for every address podwire stores or compares:
 * IPv4 as dotted decimal, IPv6 in the RFC 5952 canonical form (lower case, no leading zeros,
 * the longest run of two or more zero groups compressed to "::", the first such run on a tie).
 * IPv4-mapped IPv6 addresses are written in hex groups (as the WHATWG URL serialiser does),
 * not in the mixed "::ffff:1.2.3.4" form.
 */

import { InvalidConfigError } from '../base/errors.js';

export type IpFamily = 4 | 6;

export interface IpValue {
  family: IpFamily;
  value: bigint;
}

/** Number of bits in an address of the family. */
export function addressBits(family: IpFamily): 32 | 128 {
  return family === 4 ? 32 : 128;
}

const IPV4_OCTET = /^(0|[1-9][0-9]{0,2})$/;
const IPV6_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Parses dotted decimal; leading zeros are refused (they read as octal to some tools). */
function parseIpv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!IPV4_OCTET.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

/** Parses the groups on one side of "::"; an embedded IPv4 is allowed only as the very last piece. */
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

/** Parses an IPv4 or IPv6 address (no zone, no brackets); undefined when it is not one. */
export function parseIp(text: string): IpValue | undefined {
  if (text.includes(':')) {
    const value = parseIpv6(text);
    return value === undefined ? undefined : { family: 6, value };
  }
  const value = parseIpv4(text);
  return value === undefined ? undefined : { family: 4, value };
}

/** Like `parseIp`, but throws ERR_INVALID_CONFIG naming `what` and the value. */
export function parseIpOrThrow(text: string, what = 'IP address'): IpValue {
  const ip = typeof text === 'string' ? parseIp(text) : undefined;
  if (ip === undefined) {
    throw new InvalidConfigError(`invalid ${what} ${JSON.stringify(text)}`);
  }
  return ip;
}

/** Canonical text of an address value (see the file comment). */
export function formatIp(family: IpFamily, value: bigint): string {
  if (family === 4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
  }
  const groups: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(Number((value >> shift) & 0xffffn));
  // Longest run of zero groups, length >= 2; the first one wins a tie (RFC 5952 section 4.2.3).
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
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

/** The canonical text of `text`; throws ERR_INVALID_CONFIG when it is not an address. */
export function canonicalIp(text: string, what?: string): string {
  const ip = parseIpOrThrow(text, what);
  return formatIp(ip.family, ip.value);
}
