/**
 * IP addresses between text and the kernel's byte form. Formatting follows glibc's inet_ntop (which
 * `ip` uses), so text from here compares equal to `ip -j` output: lower-case hex, the first longest
 * run of two or more zero groups compressed, IPv4-mapped and IPv4-compatible addresses dotted.
 */
import { InternalError, type PodwireError } from '../../base/errors.js';
import { AF_INET, AF_INET6 } from '../libc.js';

export interface IpAddress {
  family: typeof AF_INET | typeof AF_INET6;
  bytes: Uint8Array;
}

export interface IpPrefix extends IpAddress {
  prefixLength: number;
}

function invalid(what: string, text: string): PodwireError {
  return new InternalError(`invalid ${what} "${text}"`);
}

const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])';
const IPV4_PATTERN = new RegExp(`^${OCTET}(\\.${OCTET}){3}$`);
const GROUP_PATTERN = /^[0-9a-f]{1,4}$/i;

function parseIpv4(text: string): Uint8Array | undefined {
  if (!IPV4_PATTERN.test(text)) return undefined;
  return Uint8Array.from(text.split('.'), Number);
}

function parseGroups(text: string): number[] | undefined {
  if (text === '') return [];
  const parts = text.split(':');
  const words: number[] = [];
  for (const [i, part] of parts.entries()) {
    if (i === parts.length - 1 && part.includes('.')) {
      const v4 = parseIpv4(part);
      if (v4 === undefined) return undefined;
      words.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
    } else {
      if (!GROUP_PATTERN.test(part)) return undefined;
      words.push(Number.parseInt(part, 16));
    }
  }
  return words;
}

function parseIpv6(text: string): Uint8Array | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = parseGroups(halves[0] ?? '');
  const tail = halves.length === 2 ? parseGroups(halves[1] ?? '') : [];
  if (head === undefined || tail === undefined) return undefined;
  // An embedded IPv4 address is only allowed at the very end.
  if (halves.length === 2 && (halves[0] ?? '').includes('.')) return undefined;
  const fill = 8 - head.length - tail.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return undefined;
  const words = [...head, ...new Array<number>(fill).fill(0), ...tail];
  const out = new Uint8Array(16);
  for (const [i, w] of words.entries()) {
    out[2 * i] = w >> 8;
    out[2 * i + 1] = w & 0xff;
  }
  return out;
}

/** Parses an IPv4 (dotted quad) or IPv6 address; throws on anything else (including zone ids). */
export function parseIp(text: string): IpAddress {
  const v4 = parseIpv4(text);
  if (v4 !== undefined) return { family: AF_INET, bytes: v4 };
  const v6 = text.includes(':') ? parseIpv6(text) : undefined;
  if (v6 !== undefined) return { family: AF_INET6, bytes: v6 };
  throw invalid('IP address', text);
}

/** Parses `address/prefix`; the address keeps its host bits (as `ip addr add` does). */
export function parseCidr(text: string): IpPrefix {
  const slash = text.indexOf('/');
  if (slash < 0) throw invalid('CIDR', text);
  const ip = parseIp(text.slice(0, slash));
  const lenText = text.slice(slash + 1);
  const max = ip.bytes.length * 8;
  if (!/^[0-9]{1,3}$/.test(lenText) || Number(lenText) > max) throw invalid('CIDR', text);
  return { ...ip, prefixLength: Number(lenText) };
}

function formatIpv4(b: Uint8Array): string {
  return Array.from(b).join('.');
}

function formatIpv6(b: Uint8Array): string {
  const words: number[] = [];
  for (let i = 0; i < 8; i++) words.push(((b[2 * i] ?? 0) << 8) | (b[2 * i + 1] ?? 0));
  let bestBase = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      bestBase = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (bestLen < 2) bestBase = -1;
  // glibc prints ::a.b.c.d (IPv4-compatible) and ::ffff:a.b.c.d (IPv4-mapped) dotted.
  if (bestBase === 0 && (bestLen === 6 || (bestLen === 5 && words[5] === 0xffff))) {
    const prefix = bestLen === 6 ? '::' : '::ffff:';
    return prefix + formatIpv4(b.subarray(12, 16));
  }
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (i === bestBase) {
      out += '::';
      i += bestLen - 1;
      continue;
    }
    if (out !== '' && !out.endsWith(':')) out += ':';
    out += (words[i] ?? 0).toString(16);
  }
  return out;
}

/** Formats 4 or 16 bytes as inet_ntop does. */
export function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return formatIpv4(bytes);
  if (bytes.length === 16) return formatIpv6(bytes);
  throw new InternalError(`an IP address has 4 or 16 bytes, not ${bytes.length}`);
}

export function formatCidr(bytes: Uint8Array, prefixLength: number): string {
  return `${formatIp(bytes)}/${prefixLength}`;
}
