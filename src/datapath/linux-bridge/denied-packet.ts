/**
 * An NFLOG message of the policy table's deny chains (policy-table.ts) as a `DeniedPacket`: the
 * direction from the prefix, the addresses, protocol and destination port from the copied headers
 * (the IPv4 header with its options, or the IPv6 header and its extension headers).
 */
import { formatIpBytes } from '../../base/ip.js';
import type { NflogPacket } from '../../kernel/netlink/nfulnl-message.js';
import { NFPROTO_IPV4, NFPROTO_IPV6 } from '../../kernel/netlink/uapi/nfnetlink.js';
import type { DeniedPacket } from '../policy-backend.js';
import { denyLogPrefix, type PolicyDirection } from './policy-table.js';

const PROTOCOLS: Record<number, string> = { 1: 'ICMP', 6: 'TCP', 17: 'UDP', 58: 'ICMPv6', 132: 'SCTP' };
const WITH_PORTS = new Set([6, 17, 132]);
/** IPv6 extension headers walked to the transport header: hop-by-hop, routing, destination options. */
const EXTENSIONS = new Set([0, 43, 60]);
const FRAGMENT = 44;

const DIRECTIONS: Array<[string, PolicyDirection]> = [
  [denyLogPrefix('ingress'), 'ingress'],
  [denyLogPrefix('egress'), 'egress'],
];

/** The denied packet an NFLOG message reports; undefined for a message that is not one (or too short). */
export function deniedPacket(p: NflogPacket): DeniedPacket | undefined {
  const direction = DIRECTIONS.find(([prefix]) => p.prefix === prefix)?.[1];
  if (!direction) return undefined;
  const b = p.payload;
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  let proto: number;
  let l4: number;
  let src: string;
  let dst: string;
  let first = true; // the first fragment, or not a fragment: the transport header is there
  if (p.family === NFPROTO_IPV4) {
    if (b.length < 20 || (b[0] as number) >> 4 !== 4) return undefined;
    l4 = ((b[0] as number) & 0x0f) * 4;
    proto = b[9] as number;
    first = (v.getUint16(6) & 0x1fff) === 0;
    src = formatIpBytes(b, 12, 4);
    dst = formatIpBytes(b, 16, 4);
  } else if (p.family === NFPROTO_IPV6) {
    if (b.length < 40 || (b[0] as number) >> 4 !== 6) return undefined;
    src = formatIpBytes(b, 8, 16);
    dst = formatIpBytes(b, 24, 16);
    proto = b[6] as number;
    l4 = 40;
    for (let hops = 0; hops < 8 && b.length >= l4 + 8; hops++) {
      if (EXTENSIONS.has(proto)) {
        const next = b[l4] as number;
        l4 += ((b[l4 + 1] as number) + 1) * 8;
        proto = next;
      } else if (proto === FRAGMENT) {
        first = (v.getUint16(l4 + 2) & 0xfff8) === 0;
        proto = b[l4] as number;
        l4 += 8;
      } else break;
    }
  } else return undefined;
  const out: DeniedPacket = { direction, src, dst, protocol: PROTOCOLS[proto] ?? String(proto) };
  if (WITH_PORTS.has(proto) && first && b.length >= l4 + 4) out.port = v.getUint16(l4 + 2);
  return out;
}
