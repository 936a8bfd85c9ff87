/**
 * ICMPv6 Neighbor Advertisement (RFC 4861 section 4.4) in IPv6 in Ethernet: the IPv6 counterpart of a
 * gratuitous ARP. Names follow <netinet/icmp6.h> and <linux/ipv6.h>.
 *
 * Frame layout (no IPv6 extension headers; podwire never sends them, and the decoder refuses them):
 *   Ethernet (14) | IPv6 header (40) | ICMPv6: type, code, checksum, R/S/O flags + reserved, target (24)
 *   | options (8 octets each for Ethernet; podwire writes only Target Link-Layer Address).
 */
import { DecodeError, InternalError, InvalidConfigError, type PodwireError } from '../base/errors.js';
import { formatIpBytes, IPV6_LEN, ipToBytes } from '../base/ip.js';
import { formatMac, parseMac } from '../base/mac.js';
import { decodeEthernetFrame, ETH_HLEN, ETH_P_IPV6, writeEthernetHeader } from './ethernet.js';

export const IPPROTO_ICMPV6 = 58;
export const ND_NEIGHBOR_ADVERT = 136;
export const ND_OPT_TARGET_LINKADDR = 2;
/** Flag bits of the first octet after the checksum (ND_NA_FLAG_* in host order of that octet). */
export const ND_NA_FLAG_ROUTER = 0x80;
export const ND_NA_FLAG_SOLICITED = 0x40;
export const ND_NA_FLAG_OVERRIDE = 0x20;
/** RFC 4861 7.1.2: a receiver discards ND messages whose hop limit is not 255 (not routed). */
export const ND_HOP_LIMIT = 255;

export const IPV6_ALL_NODES = 'ff02::1';
/** RFC 2464 section 7: 33:33 followed by the low 32 bits of the multicast group ff02::1. */
export const IPV6_ALL_NODES_MAC = '33:33:00:00:00:01';

const IPV6_HLEN = 40;
const NA_LEN = 24;
/** Option length unit (RFC 4861 4.6): lengths count 8-octet blocks. */
const ND_OPT_UNIT = 8;
const TLLA_OPT_LEN = ND_OPT_UNIT;
/** The frame `unsolicitedNeighborAdvertisement` builds: 14 + 40 + 24 + 8. */
export const NA_FRAME_LEN = ETH_HLEN + IPV6_HLEN + NA_LEN + TLLA_OPT_LEN;

const IP = ETH_HLEN;
const ICMP = IP + IPV6_HLEN;

/** A Neighbor Advertisement with its IPv6 and Ethernet addresses; hop limit is always 255. */
export interface NeighborAdvertisement {
  /** Ethernet destination. */
  dst: string;
  /** Ethernet source. */
  src: string;
  ipSrc: string;
  ipDst: string;
  router: boolean;
  /** Must be false when ipDst is multicast (RFC 4861 7.1.2). */
  solicited: boolean;
  override: boolean;
  /** The address being advertised; never multicast. */
  target: string;
  /** Target Link-Layer Address option; undefined when the option is absent. */
  targetLinkAddress: string | undefined;
}

/**
 * The one's complement checksum of an ICMPv6 message over the IPv6 pseudo-header (RFC 8200 8.1:
 * src, dst, 32-bit upper-layer length, 3 zero octets, next header 58). Computed over `message` as
 * given: zero its checksum field to compute one; a message with a correct checksum yields 0.
 */
export function icmpv6Checksum(src: Uint8Array, dst: Uint8Array, message: Uint8Array): number {
  if (src.length !== IPV6_LEN || dst.length !== IPV6_LEN) {
    throw new InternalError('icmpv6Checksum: addresses must be 16 octets');
  }
  let sum = sum16(src) + sum16(dst) + sum16(message);
  sum += Math.floor(message.length / 0x10000) + (message.length & 0xffff) + IPPROTO_ICMPV6;
  while (sum > 0xffff) sum = (sum & 0xffff) + Math.floor(sum / 0x10000);
  return ~sum & 0xffff;
}

/** Sum of big-endian 16-bit words, an odd last octet padded with zero; not yet folded. */
function sum16(bytes: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < bytes.length; i += 2) {
    sum += ((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0);
  }
  return sum;
}

function isMulticast(ipv6: Uint8Array): boolean {
  return ipv6[0] === 0xff;
}

/** Encodes the frame; writes the TLLA option only when `targetLinkAddress` is set. */
export function encodeNeighborAdvertisement(na: NeighborAdvertisement): Buffer {
  const ipSrc = ipToBytes(na.ipSrc, 6);
  const ipDst = ipToBytes(na.ipDst, 6);
  const target = ipToBytes(na.target, 6);
  if (isMulticast(target)) {
    throw new InvalidConfigError(`Neighbor Advertisement target ${na.target} is multicast`);
  }
  if (na.solicited && isMulticast(ipDst)) {
    throw new InternalError(`a solicited Neighbor Advertisement cannot go to multicast ${na.ipDst}`);
  }
  const icmpLen = NA_LEN + (na.targetLinkAddress === undefined ? 0 : TLLA_OPT_LEN);
  const out = Buffer.alloc(ICMP + icmpLen);

  writeEthernetHeader({ dst: na.dst, src: na.src, ethertype: ETH_P_IPV6 }, out, 0);
  out.writeUInt32BE(0x6000_0000, IP); // version 6, traffic class 0, flow label 0
  out.writeUInt16BE(icmpLen, IP + 4);
  out.writeUInt8(IPPROTO_ICMPV6, IP + 6);
  out.writeUInt8(ND_HOP_LIMIT, IP + 7);
  ipSrc.copy(out, IP + 8);
  ipDst.copy(out, IP + 24);

  out.writeUInt8(ND_NEIGHBOR_ADVERT, ICMP);
  out.writeUInt8(0, ICMP + 1);
  const flags =
    (na.router ? ND_NA_FLAG_ROUTER : 0) |
    (na.solicited ? ND_NA_FLAG_SOLICITED : 0) |
    (na.override ? ND_NA_FLAG_OVERRIDE : 0);
  out.writeUInt8(flags, ICMP + 4);
  target.copy(out, ICMP + 8);
  if (na.targetLinkAddress !== undefined) {
    out.writeUInt8(ND_OPT_TARGET_LINKADDR, ICMP + NA_LEN);
    out.writeUInt8(TLLA_OPT_LEN / ND_OPT_UNIT, ICMP + NA_LEN + 1);
    parseMac(na.targetLinkAddress).copy(out, ICMP + NA_LEN + 2);
  }
  out.writeUInt16BE(icmpv6Checksum(ipSrc, ipDst, out.subarray(ICMP)), ICMP + 2);
  return out;
}

/**
 * The unsolicited Neighbor Advertisement that announces `ipv6` at `mac` to all nodes (RFC 4861 7.2.6):
 * from the address itself to ff02::1, Override set, Solicited and Router clear, with the Target
 * Link-Layer Address option. Byte for byte what Linux sends for `ndisc_notify` on a non-router.
 */
export function unsolicitedNeighborAdvertisement(mac: string, ipv6: string): Buffer {
  return encodeNeighborAdvertisement({
    dst: IPV6_ALL_NODES_MAC,
    src: mac,
    ipSrc: ipv6,
    ipDst: IPV6_ALL_NODES,
    router: false,
    solicited: false,
    override: true,
    target: ipv6,
    targetLinkAddress: mac,
  });
}

function malformed(reason: string): PodwireError {
  return new DecodeError(`malformed Neighbor Advertisement: ${reason}`);
}

/**
 * Decodes a Neighbor Advertisement frame and enforces RFC 4861 7.1.2 validity: hop limit 255, code 0,
 * length >= 24, correct checksum, non-multicast target, Solicited clear towards multicast, every option
 * of non-zero length within the message. Unknown options are skipped, as the RFC requires; trailing
 * bytes after the IPv6 payload (link padding) are ignored.
 */
export function decodeNeighborAdvertisement(frame: Buffer): NeighborAdvertisement {
  const { header, payload } = decodeEthernetFrame(frame);
  if (header.ethertype !== ETH_P_IPV6) {
    throw malformed(`ethertype 0x${header.ethertype.toString(16).padStart(4, '0')} is not IPv6 (0x86dd)`);
  }
  if (payload.length < IPV6_HLEN) throw malformed(`IPv6 header truncated at ${payload.length} bytes`);
  const version = payload.readUInt8(0) >> 4;
  if (version !== 6) throw malformed(`IP version ${version} in an IPv6 frame`);
  const icmpLen = payload.readUInt16BE(4);
  const nextHeader = payload.readUInt8(6);
  const hopLimit = payload.readUInt8(7);
  if (nextHeader !== IPPROTO_ICMPV6) throw malformed(`next header ${nextHeader} is not ICMPv6 (58)`);
  if (hopLimit !== ND_HOP_LIMIT) throw malformed(`hop limit ${hopLimit}, must be 255`);
  if (IPV6_HLEN + icmpLen > payload.length) {
    throw malformed(`IPv6 payload length ${icmpLen} exceeds the ${payload.length - IPV6_HLEN} bytes present`);
  }
  if (icmpLen < NA_LEN) throw malformed(`ICMPv6 length ${icmpLen}, need at least ${NA_LEN}`);

  const ipSrc = payload.subarray(8, 24);
  const ipDst = payload.subarray(24, 40);
  const icmp = payload.subarray(IPV6_HLEN, IPV6_HLEN + icmpLen);
  const type = icmp.readUInt8(0);
  const code = icmp.readUInt8(1);
  if (type !== ND_NEIGHBOR_ADVERT) throw malformed(`ICMPv6 type ${type} is not Neighbor Advertisement (136)`);
  if (code !== 0) throw malformed(`ICMPv6 code ${code}, must be 0`);
  if (icmpv6Checksum(ipSrc, ipDst, icmp) !== 0) {
    throw malformed(`bad ICMPv6 checksum 0x${icmp.readUInt16BE(2).toString(16).padStart(4, '0')}`);
  }
  const flags = icmp.readUInt8(4);
  const target = icmp.subarray(8, 24);
  const solicited = (flags & ND_NA_FLAG_SOLICITED) !== 0;
  if (isMulticast(target)) throw malformed(`target ${formatIpBytes(target, 0, 16)} is multicast`);
  if (solicited && isMulticast(ipDst)) throw malformed('Solicited flag set on a multicast advertisement');

  return {
    dst: header.dst,
    src: header.src,
    ipSrc: formatIpBytes(ipSrc, 0, 16),
    ipDst: formatIpBytes(ipDst, 0, 16),
    router: (flags & ND_NA_FLAG_ROUTER) !== 0,
    solicited,
    override: (flags & ND_NA_FLAG_OVERRIDE) !== 0,
    target: formatIpBytes(target, 0, 16),
    targetLinkAddress: findTargetLinkAddress(icmp.subarray(NA_LEN)),
  };
}

/** Walks the options; returns the first Target Link-Layer Address. */
function findTargetLinkAddress(options: Buffer): string | undefined {
  let found: string | undefined;
  for (let at = 0; at < options.length; ) {
    if (options.length - at < 2) throw malformed(`option truncated at offset ${at}`);
    const type = options.readUInt8(at);
    const len = options.readUInt8(at + 1) * ND_OPT_UNIT;
    if (len === 0) throw malformed(`option type ${type} has length 0`);
    if (at + len > options.length) throw malformed(`option type ${type} overruns the message`);
    if (type === ND_OPT_TARGET_LINKADDR && found === undefined) {
      // For Ethernet the option is exactly one unit: type, length, 6-octet MAC (RFC 2464 section 6).
      if (len !== TLLA_OPT_LEN) throw malformed(`Target Link-Layer Address option of ${len} octets, want 8`);
      found = formatMac(options, at + 2);
    }
    at += len;
  }
  return found;
}
