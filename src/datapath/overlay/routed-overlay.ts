/**
 * No encapsulation: plain routes to each peer's pod CIDRs via the peer's underlay address, for nodes
 * on one L2 segment. A pod CIDR of another family than the underlay cannot be routed this way; such
 * CIDRs are reported as skipped.
 */

import { type Prefix, parsePrefixOrThrow } from '../../base/ip.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { legacyRoutedSetPeers } from './legacy-converge.js';
import type { Overlay, OverlayStatus, PeerChanges, PeerNode } from './overlay.js';
import { overlapsOwn } from './peer-routes.js';
import { type PeerEntries, PeerTable, throwIfRefused } from './peer-table.js';

export interface RoutedOverlayOptions {
  nl: Rtnetlink;
  uplinkIndex: number;
  /** This node's pod CIDRs: a peer CIDR that overlaps one is never routed. */
  podCIDRs?: readonly string[];
  /** Bench only: the pre-issue-17 full converge on every change (legacy-converge.ts). */
  legacyPeerProgramming?: boolean;
}

export class RoutedOverlay implements Overlay {
  readonly mode = 'noEncap';
  readonly overhead = 0;
  readonly #o: RoutedOverlayOptions;

  readonly #own: Prefix[];
  readonly #table: PeerTable;

  constructor(options: RoutedOverlayOptions) {
    this.#o = options;
    this.#own = (options.podCIDRs ?? []).map((c) => parsePrefixOrThrow(c));
    this.#table = new PeerTable({
      nl: options.nl,
      index: () => options.uplinkIndex,
      onlink: false,
      ownsNeighbours: false,
      entries: (p) => this.#entries(p),
    });
  }

  async start(): Promise<Record<string, never>> {
    return {};
  }

  /** Equivalent to: `ip route replace PEER_CIDR via PEER_UNDERLAY_IP dev UPLINK proto 250` per peer CIDR. */
  async setPeers(peers: readonly PeerNode[]): Promise<OverlayStatus> {
    const { nl, uplinkIndex, podCIDRs = [] } = this.#o;
    if (this.#o.legacyPeerProgramming) return legacyRoutedSetPeers(nl, uplinkIndex, podCIDRs, peers);
    return this.#done(await this.#table.converge(peers));
  }

  async updatePeers(changes: PeerChanges): Promise<void> {
    throwIfRefused('peer routes', await this.#table.update(changes));
  }

  status(): OverlayStatus {
    return this.#table.status();
  }

  #done(errors: string[]): OverlayStatus {
    throwIfRefused('peer routes', errors);
    return this.#table.status();
  }

  #entries(p: PeerNode): PeerEntries {
    const entries: PeerEntries = { routes: new Map(), neighs: new Map(), fdb: new Map(), skipped: [] };
    const v6Underlay = p.underlayIP.includes(':');
    for (const cidr of p.podCIDRs) {
      const c = parsePrefixOrThrow(cidr);
      if ((c.family === 6) !== v6Underlay) {
        entries.skipped.push(`${c.text}: another family than the underlay ${p.underlayIP}`);
        continue;
      }
      if (overlapsOwn(c, this.#own)) {
        entries.skipped.push(`${c.text}: overlaps this node's pod CIDRs`);
        continue;
      }
      entries.routes.set(c.text, p.underlayIP);
    }
    return entries;
  }

  async stop(): Promise<void> {}
}
