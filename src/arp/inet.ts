/**
 * IP address text <-> network-order bytes, the inet_pton(3)/inet_ntop(3) pair.
 *
 * `formatIPv6` produces exactly what glibc's (and libuv's) inet_ntop prints, so a frame decoded here
 * shows the same address text as `ip`, tcpdump and Node's `net.SocketAddress`.
 */

import { isIPv4, isIPv6 } from 'node:net';
import { InternalError, InvalidConfigError } from '../base/errors.js';
import { formatIp } from '../kernel/netlink/ip-text.js';

export const IPV4_LEN = 4;
export const IPV6_LEN = 16;

/** Equivalent to inet_pton(AF_INET, text): strict dotted quad, no leading zeros. */
export function parseIPv4(text: string): Buffer {
  if (!isIPv4(text)) {
    throw new InvalidConfigError(`invalid IPv4 address "${text}"`);
  }
  return Buffer.from(text.split('.').map(Number));
}

/** Equivalent to inet_ntop(AF_INET, ...) on the 4 octets at `offset`. */
export function formatIPv4(bytes: Uint8Array, offset = 0): string {
  checkSpan('formatIPv4', bytes, offset, IPV4_LEN);
  return Array.from(bytes.subarray(offset, offset + IPV4_LEN)).join('.');
}

/**
 * Equivalent to inet_pton(AF_INET6, text). Accepts '::' compression and a trailing dotted quad
 * ("::ffff:10.0.0.1"); rejects zone indices ("fe80::1%eth0"), which are not part of the address.
 */
export function parseIPv6(text: string): Buffer {
  if (!isIPv6(text) || text.includes('%')) {
    throw new InvalidConfigError(`invalid IPv6 address "${text}"`);
  }
  const gap = text.indexOf('::');
  const head = gap === -1 ? text : text.slice(0, gap);
  const tail = gap === -1 ? '' : text.slice(gap + 2);
  const headWords = toWords(head);
  const tailWords = toWords(tail);
  const missing = 8 - headWords.length - tailWords.length;
  // isIPv6 has checked the grammar; this guards the arithmetic the grammar implies.
  if (missing < 0 || (gap === -1 && missing !== 0) || (gap !== -1 && missing < 1)) {
    throw new InvalidConfigError(`invalid IPv6 address "${text}": wrong number of groups`);
  }
  const out = Buffer.alloc(IPV6_LEN);
  headWords.forEach((w, i) => {
    out.writeUInt16BE(w, 2 * i);
  });
  tailWords.forEach((w, i) => {
    out.writeUInt16BE(w, 2 * (8 - tailWords.length + i));
  });
  return out;
}

/** Splits colon-separated groups into 16-bit words; a dotted quad group yields two words. */
function toWords(groups: string): number[] {
  if (groups === '') return [];
  const words: number[] = [];
  for (const group of groups.split(':')) {
    if (group.includes('.')) {
      const v4 = parseIPv4(group);
      words.push(v4.readUInt16BE(0), v4.readUInt16BE(2));
    } else {
      words.push(Number.parseInt(group, 16));
    }
  }
  return words;
}

/**
 * Equivalent to inet_ntop(AF_INET6, ...) on the 16 octets at `offset`: lowercase hex without leading
 * zeros; the longest run of two or more zero groups (the first one on a tie) becomes '::'; an
 * IPv4-mapped address (::ffff:a.b.c.d) and the deprecated IPv4-compatible form (::a.b.c.d, when the
 * last 32 bits are at least 0.1.0.0) end in a dotted quad.
 */
export function formatIPv6(bytes: Uint8Array, offset = 0): string {
  checkSpan('formatIPv6', bytes, offset, IPV6_LEN);
  // One inet_ntop for the whole project: the rtnetlink codec's, which `ip` output is checked against.
  return formatIp(bytes.subarray(offset, offset + IPV6_LEN));
}

/** Returns the canonical (inet_ntop) text of an IPv6 address, validating it. */
export function normalizeIPv6(text: string): string {
  return formatIPv6(parseIPv6(text));
}

function checkSpan(what: string, bytes: Uint8Array, offset: number, len: number): void {
  if (!Number.isInteger(offset) || offset < 0 || offset + len > bytes.length) {
    throw new InternalError(`${what}: need ${len} octets at offset ${offset}, have ${bytes.length}`);
  }
}
