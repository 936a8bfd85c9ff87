/**
 * Ethernet II framing (IEEE 802.3 "DIX" header, as in <linux/if_ether.h>).
 *
 * MAC addresses are carried everywhere as canonical text: six lowercase two-digit hex octets joined by
 * ':' ("02:42:ac:11:00:02"), the form `ip link` prints and CNI results use. Decoders always return that
 * form, so decoded values compare with `===`.
 */
import { DecodeError, InternalError, InvalidConfigError } from '../base/errors.js';

/** Octets in one Ethernet address. */
export const ETH_ALEN = 6;
/** Octets in the Ethernet II header: dst, src, ethertype. */
export const ETH_HLEN = 14;
/** Minimum frame length without the FCS; drivers of real NICs pad shorter frames, veth does not. */
export const ETH_ZLEN = 60;

export const ETH_P_IP = 0x0800;
export const ETH_P_ARP = 0x0806;
export const ETH_P_IPV6 = 0x86dd;
/** Values below this are an IEEE 802.3 length field, not an Ethernet II type. */
export const ETH_P_802_3_MIN = 0x0600;

export const BROADCAST_MAC = 'ff:ff:ff:ff:ff:ff';
export const ZERO_MAC = '00:00:00:00:00:00';

const MAC_TEXT = /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/i;

/** Parses "aa:bb:cc:dd:ee:ff" (either case) into its 6 octets. */
export function parseMac(text: string): Buffer {
  if (!MAC_TEXT.test(text)) {
    throw new InvalidConfigError(`invalid MAC address "${text}": want six hex octets joined by ':'`);
  }
  return Buffer.from(text.replaceAll(':', ''), 'hex');
}

/** Formats the 6 octets at `offset` of `bytes` as canonical lowercase MAC text. */
export function formatMac(bytes: Uint8Array, offset = 0): string {
  if (!Number.isInteger(offset) || offset < 0 || offset + ETH_ALEN > bytes.length) {
    throw new InternalError(`formatMac: need ${ETH_ALEN} octets at offset ${offset}, have ${bytes.length}`);
  }
  const parts: string[] = [];
  for (let i = offset; i < offset + ETH_ALEN; i++) {
    parts.push((bytes[i] ?? 0).toString(16).padStart(2, '0'));
  }
  return parts.join(':');
}

/** Returns the canonical form of MAC text, validating it. */
export function normalizeMac(text: string): string {
  return formatMac(parseMac(text));
}

/** `struct ethhdr`. */
export interface EthernetHeader {
  dst: string;
  src: string;
  /** An Ethernet II type (>= 0x0600), e.g. ETH_P_ARP. */
  ethertype: number;
}

function checkEthertype(ethertype: number): void {
  if (!Number.isInteger(ethertype) || ethertype < ETH_P_802_3_MIN || ethertype > 0xffff) {
    throw new InternalError(`ethertype ${ethertype} is not an Ethernet II type (0x0600-0xffff)`);
  }
}

/** Writes the 14-byte header at `offset` of `out`; returns the offset just past it. */
export function writeEthernetHeader(header: EthernetHeader, out: Buffer, offset = 0): number {
  checkEthertype(header.ethertype);
  parseMac(header.dst).copy(out, offset);
  parseMac(header.src).copy(out, offset + ETH_ALEN);
  out.writeUInt16BE(header.ethertype, offset + 2 * ETH_ALEN);
  return offset + ETH_HLEN;
}

/** Encodes a whole frame: header then payload, with no padding and no FCS. */
export function encodeEthernetFrame(header: EthernetHeader, payload: Uint8Array): Buffer {
  const out = Buffer.alloc(ETH_HLEN + payload.length);
  writeEthernetHeader(header, out);
  out.set(payload, ETH_HLEN);
  return out;
}

/** A decoded frame. `payload` is a view into the decoded buffer (no copy): it includes any padding. */
export interface EthernetFrame {
  header: EthernetHeader;
  payload: Buffer;
}

/** Decodes an Ethernet II frame (without FCS); rejects runts and 802.3 length-field frames. */
export function decodeEthernetFrame(frame: Buffer): EthernetFrame {
  if (frame.length < ETH_HLEN) {
    throw new DecodeError(`Ethernet frame too short: ${frame.length} bytes, header needs ${ETH_HLEN}`);
  }
  const ethertype = frame.readUInt16BE(2 * ETH_ALEN);
  if (ethertype < ETH_P_802_3_MIN) {
    throw new DecodeError(
      `not an Ethernet II frame: type/length field 0x${ethertype.toString(16).padStart(4, '0')} is an 802.3 length`,
    );
  }
  return {
    header: { dst: formatMac(frame, 0), src: formatMac(frame, ETH_ALEN), ethertype },
    payload: frame.subarray(ETH_HLEN),
  };
}
