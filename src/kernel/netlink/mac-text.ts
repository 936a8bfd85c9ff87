/** Hardware (MAC) addresses in `ip` notation: lower-case hex octets separated by colons. */
import { InternalError } from '../../base/errors.js';

export function formatMac(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(':');
}

const MAC_PATTERN = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

/** Parses a 6-octet Ethernet address, `aa:bb:cc:dd:ee:ff`. */
export function parseMac(text: string): Uint8Array {
  if (!MAC_PATTERN.test(text)) throw new InternalError(`invalid MAC address "${text}"`);
  return Uint8Array.from(text.split(':'), (h) => Number.parseInt(h, 16));
}
