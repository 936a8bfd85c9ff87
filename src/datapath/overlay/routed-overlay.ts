/**
 * No encapsulation: plain routes to each peer's pod CIDRs via the peer's underlay address, for nodes
 * on one L2 segment. A pod CIDR of another family than the underlay cannot be routed this way; such
 * CIDRs are reported as skipped.
 */

import { parsePrefixOrThrow } from '../../base/ip.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { Overlay, OverlayStatus, PeerNode } from './overlay.js';
import { convergeRoutes, overlapsOwn, type PeerRoute } from './peer-routes.js';

export interface RoutedOverlayOptions {
  nl: Rtnetlink;
  uplinkIndex: number;
  /** This node's pod CIDRs: a peer CIDR that overlaps one is never routed. */
  podCIDRs?: readonly string[];
}

export class RoutedOverlay implements Overlay {
  readonly mode = 'noEncap';
  readonly overhead = 0;
  readonly #o: RoutedOverlayOptions;

  constructor(options: RoutedOverlayOptions) {
    this.#o = options;
  }

  async start(): Promise<Record<string, never>> {
    return {};
  }

  /** Equivalent to: `ip route replace PEER_CIDR via PEER_UNDERLAY_IP dev UPLINK proto 250` per peer CIDR. */
  async setPeers(peers: readonly PeerNode[]): Promise<OverlayStatus> {
    const status: OverlayStatus = { peers: [], skipped: [] };
    const routes: PeerRoute[] = [];
    const own = (this.#o.podCIDRs ?? []).map((c) => parsePrefixOrThrow(c));
    for (const p of peers) {
      const v6Underlay = p.underlayIP.includes(':');
      for (const cidr of p.podCIDRs) {
        const c = parsePrefixOrThrow(cidr);
        if ((c.family === 6) !== v6Underlay) {
          status.skipped.push({
            name: p.name,
            reason: `${c.text}: another family than the underlay ${p.underlayIP}`,
          });
          continue;
        }
        if (overlapsOwn(c, own)) {
          status.skipped.push({ name: p.name, reason: `${c.text}: overlaps this node's pod CIDRs` });
          continue;
        }
        routes.push({ dst: c.text, gateway: p.underlayIP, onlink: false });
      }
      status.peers.push(p.name);
    }
    convergeRoutes(this.#o.nl, this.#o.uplinkIndex, routes);
    return status;
  }

  async stop(): Promise<void> {}
}
