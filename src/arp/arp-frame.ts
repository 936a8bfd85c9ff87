/**
 * ARP for IPv4 over Ethernet (RFC 826; `struct arphdr` + `struct arpreq` layout of <linux/if_arp.h>).
 *
 * Only the Ethernet/IPv4 form is supported (htype 1, ptype 0x0800, hlen 6, plen 4), the only one
 * podwire sends or audits; decoders reject everything else with ERR_DECODE.
 */
import { DecodeError, InternalError } from '../base/errors.js';
import { formatIpBytes, IPV4_LEN, ipToBytes } from '../base/ip.js';
import { BROADCAST_MAC, ETH_ALEN, formatMac, parseMac, ZERO_MAC } from '../base/mac.js';
import { decodeEthernetFrame, ETH_HLEN, ETH_P_ARP, ETH_P_IP, writeEthernetHeader } from './ethernet.js';

export const ARPHRD_ETHER = 1;
export const ARPOP_REQUEST = 1;
export const ARPOP_REPLY = 2;
export type ArpOp = typeof ARPOP_REQUEST | typeof ARPOP_REPLY;

/** Fixed part of `struct arphdr`: htype, ptype, hlen, plen, op. */
const ARP_HDR_LEN = 8;
/** The Ethernet/IPv4 ARP packet: header, then sha, spa, tha, tpa. */
export const ARP_PACKET_LEN = ARP_HDR_LEN + 2 * (ETH_ALEN + IPV4_LEN);
/** An ARP frame as sent (unpadded; a NIC pads it to ETH_ZLEN on the wire, veth does not). */
export const ARP_FRAME_LEN = ETH_HLEN + ARP_PACKET_LEN;

const SHA = ARP_HDR_LEN;
const SPA = SHA + ETH_ALEN;
const THA = SPA + IPV4_LEN;
const TPA = THA + ETH_ALEN;

/** One ARP packet; MACs in canonical text (see ethernet.ts), IPv4 addresses dotted. */
export interface ArpPacket {
  op: ArpOp;
  /** Sender hardware address. */
  sha: string;
  /** Sender protocol (IPv4) address. */
  spa: string;
  /** Target hardware address; all zeros in a request whose target is unknown. */
  tha: string;
  /** Target protocol (IPv4) address. */
  tpa: string;
}

/** An ARP packet with the Ethernet addresses it travels between (ethertype is always ETH_P_ARP). */
export interface ArpFrame {
  dst: string;
  src: string;
  arp: ArpPacket;
}

function checkOp(op: number): asserts op is ArpOp {
  if (op !== ARPOP_REQUEST && op !== ARPOP_REPLY) {
    throw new InternalError(`ARP op ${op} is neither request (1) nor reply (2)`);
  }
}

/** Writes the 28-byte packet at `offset` of `out`; returns the offset just past it. */
function writeArpPacket(packet: ArpPacket, out: Buffer, offset: number): number {
  checkOp(packet.op);
  out.writeUInt16BE(ARPHRD_ETHER, offset);
  out.writeUInt16BE(ETH_P_IP, offset + 2);
  out.writeUInt8(ETH_ALEN, offset + 4);
  out.writeUInt8(IPV4_LEN, offset + 5);
  out.writeUInt16BE(packet.op, offset + 6);
  parseMac(packet.sha).copy(out, offset + SHA);
  ipToBytes(packet.spa, 4).copy(out, offset + SPA);
  parseMac(packet.tha).copy(out, offset + THA);
  ipToBytes(packet.tpa, 4).copy(out, offset + TPA);
  return offset + ARP_PACKET_LEN;
}

/** Encodes the ARP packet alone (what a SOCK_DGRAM packet socket sends). */
export function encodeArpPacket(packet: ArpPacket): Buffer {
  const out = Buffer.alloc(ARP_PACKET_LEN);
  writeArpPacket(packet, out, 0);
  return out;
}

/**
 * Decodes an Ethernet/IPv4 ARP packet. Bytes after the 28 the packet needs are ignored: received
 * frames usually carry padding up to ETH_ZLEN.
 */
export function decodeArpPacket(bytes: Buffer): ArpPacket {
  if (bytes.length < ARP_PACKET_LEN) {
    throw new DecodeError(`ARP packet too short: ${bytes.length} bytes, need ${ARP_PACKET_LEN}`);
  }
  const htype = bytes.readUInt16BE(0);
  const ptype = bytes.readUInt16BE(2);
  const hlen = bytes.readUInt8(4);
  const plen = bytes.readUInt8(5);
  const op = bytes.readUInt16BE(6);
  if (htype !== ARPHRD_ETHER) {
    throw new DecodeError(`ARP hardware type ${htype} is not Ethernet (${ARPHRD_ETHER})`);
  }
  if (ptype !== ETH_P_IP) {
    throw new DecodeError(`ARP protocol type 0x${ptype.toString(16)} is not IPv4 (0x0800)`);
  }
  if (hlen !== ETH_ALEN || plen !== IPV4_LEN) {
    throw new DecodeError(
      `ARP address lengths hlen=${hlen} plen=${plen}, want hlen=${ETH_ALEN} plen=${IPV4_LEN}`,
    );
  }
  if (op !== ARPOP_REQUEST && op !== ARPOP_REPLY) {
    throw new DecodeError(`ARP op ${op} is neither request (1) nor reply (2)`);
  }
  return {
    op,
    sha: formatMac(bytes, SHA),
    spa: formatIpBytes(bytes, SPA, 4),
    tha: formatMac(bytes, THA),
    tpa: formatIpBytes(bytes, TPA, 4),
  };
}

/** Encodes a whole Ethernet frame carrying `frame.arp` (42 bytes, unpadded). */
export function encodeArpFrame(frame: ArpFrame): Buffer {
  const out = Buffer.alloc(ARP_FRAME_LEN);
  const at = writeEthernetHeader({ dst: frame.dst, src: frame.src, ethertype: ETH_P_ARP }, out, 0);
  writeArpPacket(frame.arp, out, at);
  return out;
}

/** Decodes an Ethernet frame that must carry ARP; trailing padding is allowed. */
export function decodeArpFrame(bytes: Buffer): ArpFrame {
  const { header, payload } = decodeEthernetFrame(bytes);
  if (header.ethertype !== ETH_P_ARP) {
    throw new DecodeError(
      `not an ARP frame: ethertype 0x${header.ethertype.toString(16).padStart(4, '0')}, want 0x0806`,
    );
  }
  return { dst: header.dst, src: header.src, arp: decodeArpPacket(payload) };
}

/**
 * The gratuitous ARP that announces `ipv4` at `mac`: a broadcast request with sender = target = the
 * address and a zero target MAC (an "ARP Announcement", RFC 5227 section 2.3). Byte for byte what the
 * Linux kernel itself sends for `arp_notify`. Debian's `arping -U` (Habets) differs only in ways that
 * receivers ignore: it sets tha to ff:ff:ff:ff:ff:ff and pads the frame.
 */
export function gratuitousArp(mac: string, ipv4: string): Buffer {
  return encodeArpFrame({
    dst: BROADCAST_MAC,
    src: mac,
    arp: { op: ARPOP_REQUEST, sha: mac, spa: ipv4, tha: ZERO_MAC, tpa: ipv4 },
  });
}
