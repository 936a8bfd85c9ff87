/**
 * Converging the routes of one output device to a desired set: the routes are podwire's own
 * (rtm_protocol RTPROT_PODWIRE), so anything else on the device is left alone.
 */
import { type Prefix, prefixesOverlap } from '../../base/ip.js';
import { AF_INET, AF_INET6 } from '../../kernel/libc.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { RTPROT_PODWIRE } from './overlay.js';

export interface PeerRoute {
  /** Destination CIDR (a peer's pod CIDR). */
  dst: string;
  gateway: string;
  onlink: boolean;
}

function familyOf(cidr: string): number {
  return cidr.includes(':') ? AF_INET6 : AF_INET;
}

/** Equivalent to: `ip route replace DST via GW dev OIF [onlink] proto 250` for each, and `ip route del` of the rest. */
export function convergeRoutes(nl: Rtnetlink, oif: number, desired: readonly PeerRoute[]): void {
  const want = new Map(desired.map((r) => [r.dst, r]));
  for (const family of [AF_INET, AF_INET6]) {
    for (const have of nl.routes({ family, oif })) {
      if (have.protocol !== RTPROT_PODWIRE || have.dst === undefined) continue;
      const w = want.get(have.dst);
      if (w && w.gateway === have.gateway) {
        want.delete(have.dst);
        continue;
      }
      nl.deleteRoute({ family, dst: have.dst, gateway: have.gateway, oif });
    }
  }
  for (const r of want.values()) {
    nl.addRoute({
      family: familyOf(r.dst),
      dst: r.dst,
      gateway: r.gateway,
      oif,
      onlink: r.onlink,
      protocol: RTPROT_PODWIRE,
    });
  }
}

/**
 * Whether a peer's CIDR overlaps one of this node's own pod CIDRs (a stale record, a misconfigured
 * file): such a CIDR is never routed to a peer, and the rest of the peers are still programmed.
 */
export function overlapsOwn(cidr: Prefix, own: readonly Prefix[]): boolean {
  return own.some((o) => prefixesOverlap(o, cidr));
}
