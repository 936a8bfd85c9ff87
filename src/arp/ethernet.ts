/**
 * Ethernet II framing (IEEE 802.3 "DIX" header, as in <linux/if_ether.h>).
 *
 * MAC addresses are carried everywhere as canonical text: six lowercase two-digit hex octets joined by
 * ':' ("02:42:ac:11:00:02"), the form `ip link` prints and CNI results use. Decoders always return that
 * form, so decoded values compare with `===`.
 */
import { DecodeError, InternalError } from '../base/errors.js';
import { ETH_ALEN, formatMac, parseMac } from '../base/mac.js';

/** Octets in the Ethernet II header: dst, src, ethertype. */
export const ETH_HLEN = 14;
/** Minimum frame length without the FCS; drivers of real NICs pad shorter frames, veth does not. */
export const ETH_ZLEN = 60;

export const ETH_P_IP = 0x0800;
export const ETH_P_ARP = 0x0806;
export const ETH_P_IPV6 = 0x86dd;
/** Values below this are an IEEE 802.3 length field, not an Ethernet II type. */
export const ETH_P_802_3_MIN = 0x0600;

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
