/**
 * What a captured frame claims about its sender: "IP X is at MAC Y". ARP claims (spa, sha); a neighbour
 * solicitation with a source link-layer option claims (IPv6 source, SLL); a neighbour advertisement
 * with a target link-layer option claims (target, TLL). These are exactly the frames that make
 * neighbours' caches learn a mapping (RFC 826, RFC 4861 7.2.3-7.2.5), so they are what the audit judges.
 * An 802.1Q tag is looked through: the audit may run on a trunk.
 */

import { formatIpBytes } from '../base/ip.js';
import { formatMac } from '../base/mac.js';
import { decodeArpFrame } from './arp-frame.js';
import { ETH_HLEN, ETH_P_ARP, ETH_P_IPV6 } from './ethernet.js';

/** linux/if_ether.h */
export const ETH_P_8021Q = 0x8100;
const IPV6_HLEN = 40;
const IPPROTO_ICMPV6 = 58;
export const ND_NEIGHBOR_SOLICIT = 135;
export const ND_NEIGHBOR_ADVERT = 136;
const ND_OPT_SOURCE_LINKADDR = 1;
const ND_OPT_TARGET_LINKADDR = 2;
/** ICMPv6 header (4) + reserved/flags (4) + target (16): where NS and NA options start. */
const ND_OPTS_OFFSET = 24;

export interface NeighbourClaim {
  proto: 'arp' | 'nd';
  /** The Ethernet source of the frame. */
  src: string;
  senderIp: string;
  senderMac: string;
  /** The 802.1Q VLAN ID, when the frame was tagged. */
  vlan?: number;
}

/** The claim a frame makes; `undefined` when it makes none (other traffic, a DAD probe, no option). */
export function decodeClaim(frame: Buffer): NeighbourClaim | undefined {
  if (frame.length < ETH_HLEN) return undefined;
  let type = frame.readUInt16BE(12);
  let vlan: number | undefined;
  let body = frame;
  if (type === ETH_P_8021Q && frame.length >= ETH_HLEN + 4) {
    vlan = frame.readUInt16BE(14) & 0x0fff;
    type = frame.readUInt16BE(16);
    // Drop the tag so that the untagged codecs read the rest.
    body = Buffer.concat([frame.subarray(0, 12), frame.subarray(16)]);
  }
  const tag = vlan === undefined ? {} : { vlan };
  if (type === ETH_P_ARP) {
    const f = decodeArpFrame(body);
    return { proto: 'arp', src: f.src, senderIp: f.arp.spa, senderMac: f.arp.sha, ...tag };
  }
  if (type !== ETH_P_IPV6) return undefined;
  const nd = decodeNd(body);
  return nd === undefined ? undefined : { proto: 'nd', src: formatMac(body, 6), ...nd, ...tag };
}

function decodeNd(frame: Buffer): { senderIp: string; senderMac: string } | undefined {
  const ip = ETH_HLEN;
  if (frame.length < ip + IPV6_HLEN + ND_OPTS_OFFSET) return undefined;
  if (frame.readUInt8(ip + 6) !== IPPROTO_ICMPV6) return undefined; // extension headers: not ND
  const icmp = ip + IPV6_HLEN;
  const icmpType = frame.readUInt8(icmp);
  if (icmpType !== ND_NEIGHBOR_SOLICIT && icmpType !== ND_NEIGHBOR_ADVERT) return undefined;
  const wanted = icmpType === ND_NEIGHBOR_SOLICIT ? ND_OPT_SOURCE_LINKADDR : ND_OPT_TARGET_LINKADDR;
  const end = Math.min(frame.length, icmp + frame.readUInt16BE(ip + 4));
  for (let at = icmp + ND_OPTS_OFFSET; at + 8 <= end; ) {
    const optType = frame.readUInt8(at);
    const len = frame.readUInt8(at + 1) * 8;
    if (len === 0) return undefined; // RFC 4861 4.6: a zero length invalidates the packet
    if (optType === wanted && len >= 8) {
      const senderIp =
        icmpType === ND_NEIGHBOR_SOLICIT
          ? formatIpBytes(frame, ip + 8, 16)
          : formatIpBytes(frame, icmp + 8, 16);
      if (senderIp === '::') return undefined; // DAD probes claim nothing
      return { senderIp, senderMac: formatMac(frame, at + 2) };
    }
    at += len;
  }
  return undefined;
}
