/**
 * Encapsulation with a kernel VXLAN device, flannel-style. The device holds, for each local pod CIDR,
 * that CIDR's network address (/32 or /128). For each peer and each of its pod CIDRs:
 *   ip route replace PEER_CIDR via PEER_NET dev VXLAN onlink proto 250
 *   ip neigh replace PEER_NET lladdr PEER_VTEP_MAC dev VXLAN nud permanent
 *   bridge fdb replace PEER_VTEP_MAC dev VXLAN dst PEER_UNDERLAY_IP self permanent
 * so no flooding and no learning are ever needed.
 */
import { createHash } from 'node:crypto';
import { DatapathError } from '../../base/errors.js';
import { formatIp, type Prefix, parsePrefixOrThrow } from '../../base/ip.js';
import { localUnicastMac } from '../../base/mac.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { ifaceSysctl, writeSysctl } from '../../kernel/sysctl.js';
import { legacyVxlanSetPeers } from './legacy-converge.js';
import type { Overlay, OverlayStatus, PeerChanges, PeerNode } from './overlay.js';
import { overlapsOwn } from './peer-routes.js';
import { type PeerEntries, PeerTable, throwIfRefused } from './peer-table.js';

export const VXLAN_DEVICE = 'podwire-vxlan';
export const VXLAN_VNI = 1;
export const VXLAN_PORT = 4789;

export interface VxlanOverlayOptions {
  nl: Rtnetlink;
  nodeName: string;
  /** The uplink's index and its address, the tunnel's local end. */
  uplinkIndex: number;
  underlayIP: string;
  uplinkMtu: number;
  /** This node's pod CIDRs. */
  podCIDRs: readonly string[];
  /** Bench only: the pre-issue-17 full converge on every change (legacy-converge.ts). */
  legacyPeerProgramming?: boolean;
}

/**
 * A peer's VTEP MAC: its record's, else the one every node derives from its name, so a peer's is
 * known even when no record says it. The agent's peer check (agent/startup/peer-check.ts) keeps these
 * unique among the accepted peers, by this same rule.
 */
export function vtepMacOf(p: Pick<PeerNode, 'name' | 'vtepMac'>): string {
  return p.vtepMac ?? vtepMacFor(p.name);
}

/** The network address of a CIDR, as text. */
function networkOf(cidr: string): string {
  const c = parsePrefixOrThrow(cidr);
  return formatIp(c.family, c.network);
}

/** A stable, locally administered MAC for the node's VTEP, so a recreated device keeps its identity. */
export function vtepMacFor(nodeName: string): string {
  const b = createHash('sha256').update(`podwire-vtep\0${nodeName}`).digest().subarray(0, 6);
  return localUnicastMac(b);
}

/** Bytes VXLAN adds: outer Ethernet 14 + IP (20 | 40) + UDP 8 + VXLAN 8. */
export function vxlanOverhead(underlayIP: string): number {
  return underlayIP.includes(':') ? 70 : 50;
}

export class VxlanOverlay implements Overlay {
  readonly mode = 'encap';
  readonly overhead: number;
  readonly #o: VxlanOverlayOptions;
  #index = 0;

  readonly #own: Prefix[];
  readonly #table: PeerTable;

  constructor(options: VxlanOverlayOptions) {
    this.#o = options;
    this.overhead = vxlanOverhead(options.underlayIP);
    this.#own = options.podCIDRs.map((c) => parsePrefixOrThrow(c));
    this.#table = new PeerTable({
      nl: options.nl,
      index: () => this.#index,
      onlink: true,
      ownsNeighbours: true,
      entries: (p) => this.#entries(p),
    });
  }

  /** Equivalent to: `ip link add podwire-vxlan type vxlan id 1 dstport 4789 local IP dev UPLINK nolearning`, addresses, up. */
  async start(): Promise<{ vtepMac: string }> {
    const { nl, uplinkIndex, underlayIP, uplinkMtu, nodeName, podCIDRs } = this.#o;
    const mac = vtepMacFor(nodeName);
    const want = { vni: VXLAN_VNI, port: VXLAN_PORT, local: underlayIP, underlayIndex: uplinkIndex };
    let link = nl.linkByName(VXLAN_DEVICE);
    const v = link?.vxlan;
    if (
      link &&
      (link.kind !== 'vxlan' ||
        v?.vni !== want.vni ||
        v.port !== want.port ||
        v.local !== want.local ||
        v.underlayIndex !== want.underlayIndex ||
        v.learning)
    ) {
      // A device from another configuration (e.g. the uplink's address changed): rebuild it.
      nl.deleteLink(link.index);
      link = undefined;
    }
    if (!link) {
      link = nl.addVxlan({
        name: VXLAN_DEVICE,
        ...want,
        mtu: uplinkMtu - this.overhead,
        mac,
        learning: false,
      });
    }
    if (link.mac !== mac) nl.setMac(link.index, mac);
    this.#index = link.index;
    const present = new Set(nl.addresses({ index: link.index }).map((a) => `${a.address}/${a.prefixLength}`));
    for (const cidr of podCIDRs) {
      const net = networkOf(cidr);
      const len = net.includes(':') ? 128 : 32;
      if (!present.has(`${net}/${len}`))
        nl.addAddress(link.index, { address: net, prefixLength: len }, { nodad: len === 128 });
    }
    // The tunnel carries pods' traffic, not the node's configuration: a router advertisement that
    // came through it (from a peer, or forged) must not give the node a default route or an address.
    for (const name of ['accept_ra', 'autoconf']) {
      try {
        writeSysctl(ifaceSysctl(6, VXLAN_DEVICE, name), '0');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err; // the node has no IPv6
      }
    }
    nl.setLinkUp(link.index);
    return { vtepMac: mac };
  }

  async setPeers(peers: readonly PeerNode[]): Promise<OverlayStatus> {
    if (this.#index === 0) throw new DatapathError('VXLAN overlay not started');
    if (this.#o.legacyPeerProgramming) {
      return legacyVxlanSetPeers(this.#o.nl, this.#index, this.#o.podCIDRs, peers, vtepMacOf);
    }
    return this.#done(await this.#table.converge(peers));
  }

  async updatePeers(changes: PeerChanges): Promise<void> {
    if (this.#index === 0) throw new DatapathError('VXLAN overlay not started');
    throwIfRefused('VXLAN peers', await this.#table.update(changes));
  }

  status(): OverlayStatus {
    return this.#table.status();
  }

  #done(errors: string[]): OverlayStatus {
    throwIfRefused('VXLAN peers', errors);
    return this.#table.status();
  }

  /** Per peer CIDR a route via its network address (onlink) and a neighbour; per peer one FDB entry. */
  #entries(p: PeerNode): PeerEntries {
    const entries: PeerEntries = { routes: new Map(), neighs: new Map(), fdb: new Map(), skipped: [] };
    const mac = vtepMacOf(p);
    for (const cidr of p.podCIDRs) {
      const c = parsePrefixOrThrow(cidr);
      if (overlapsOwn(c, this.#own)) {
        entries.skipped.push(`${c.text}: overlaps this node's pod CIDRs`);
        continue;
      }
      const net = formatIp(c.family, c.network);
      entries.routes.set(c.text, net);
      entries.neighs.set(net, mac);
    }
    entries.fdb.set(mac, p.underlayIP);
    return entries;
  }

  async stop(): Promise<void> {
    this.#index = 0;
  }
}
