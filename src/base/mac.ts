/**
 * Ethernet (MAC) addresses. Text is canonical everywhere in podwire: six lower-case two-digit hex
 * octets joined by ':' ("0a:58:0a:f4:01:05"), the form `ip link` prints and CNI results carry, so
 * values compare with `===`.
 */
import { randomBytes } from 'node:crypto';
import { InternalError, InvalidConfigError } from './errors.js';
import { formatIp } from './ip.js';

/** Octets in one Ethernet address. */
export const ETH_ALEN = 6;
export const BROADCAST_MAC = 'ff:ff:ff:ff:ff:ff';
export const ZERO_MAC = '00:00:00:00:00:00';

const MAC_TEXT = /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/i;

/** Whether `text` is MAC text (either case). */
export function isMac(text: unknown): text is string {
  return typeof text === 'string' && MAC_TEXT.test(text);
}

/** Parses "aa:bb:cc:dd:ee:ff" (either case) into its 6 octets. */
export function parseMac(text: string): Buffer {
  if (!isMac(text)) {
    throw new InvalidConfigError(`invalid MAC address "${text}": want six hex octets joined by ':'`);
  }
  return Buffer.from(text.replaceAll(':', ''), 'hex');
}

/** The canonical text of the 6 octets at `offset` of `bytes`. */
export function formatMac(bytes: Uint8Array, offset = 0): string {
  if (!Number.isInteger(offset) || offset < 0 || offset + ETH_ALEN > bytes.length) {
    throw new InternalError(
      `a MAC address is ${ETH_ALEN} octets: none at offset ${offset} of ${bytes.length}`,
    );
  }
  const parts: string[] = [];
  for (let i = offset; i < offset + ETH_ALEN; i++) parts.push((bytes[i] ?? 0).toString(16).padStart(2, '0'));
  return parts.join(':');
}

/** The canonical form of MAC text, validating it. */
export function normalizeMac(text: string): string {
  return formatMac(parseMac(text));
}

/** Makes the first octet locally administered and unicast, in place, and returns the text. */
export function localUnicastMac(bytes: Uint8Array): string {
  bytes[0] = ((bytes[0] ?? 0) & 0xfe) | 0x02;
  return formatMac(bytes);
}

/** A random, locally administered unicast MAC. */
export function randomLocalMac(): string {
  return localUnicastMac(randomBytes(ETH_ALEN));
}

/**
 * The IPv6 link-local address the kernel derives from a MAC (EUI-64, RFC 4291 appendix A), the
 * default `addr_gen_mode` of a new namespace.
 */
export function eui64LinkLocal(mac: string): string {
  const b = parseMac(mac);
  let value = 0xfe80n << 112n;
  const iid = [(b[0] ?? 0) ^ 2, b[1] ?? 0, b[2] ?? 0, 0xff, 0xfe, b[3] ?? 0, b[4] ?? 0, b[5] ?? 0];
  for (const [i, octet] of iid.entries()) value |= BigInt(octet) << BigInt(8 * (7 - i));
  return formatIp(6, value);
}
