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
import { formatIp, parsePrefixOrThrow } from '../../base/ip.js';
import { localUnicastMac } from '../../base/mac.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { Overlay, OverlayStatus, PeerNode } from './overlay.js';
import { convergeRoutes, overlapsOwn, type PeerRoute } from './peer-routes.js';

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

  constructor(options: VxlanOverlayOptions) {
    this.#o = options;
    this.overhead = vxlanOverhead(options.underlayIP);
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
    nl.setLinkUp(link.index);
    return { vtepMac: mac };
  }

  async setPeers(peers: readonly PeerNode[]): Promise<OverlayStatus> {
    const nl = this.#o.nl;
    const index = this.#index;
    if (index === 0) throw new DatapathError('VXLAN overlay not started');
    const status: OverlayStatus = { peers: [], skipped: [] };
    const routes: PeerRoute[] = [];
    const neighs = new Map<string, string>(); // peer network address -> VTEP MAC
    const fdb = new Map<string, string>(); // VTEP MAC -> underlay IP
    const own = this.#o.podCIDRs.map((c) => parsePrefixOrThrow(c));
    for (const p of peers) {
      // Every node derives its VTEP MAC from its name, so a peer's is known even when no record says it.
      const mac = p.vtepMac ?? vtepMacFor(p.name);
      for (const cidr of p.podCIDRs) {
        const c = parsePrefixOrThrow(cidr);
        if (overlapsOwn(c, own)) {
          status.skipped.push({ name: p.name, reason: `${c.text}: overlaps this node's pod CIDRs` });
          continue;
        }
        const net = formatIp(c.family, c.network);
        routes.push({ dst: c.text, gateway: net, onlink: true });
        neighs.set(net, mac);
      }
      fdb.set(mac, p.underlayIP);
      status.peers.push(p.name);
    }
    convergeRoutes(nl, index, routes);
    for (const n of nl.neighbours({ index })) {
      if (n.mac === undefined || neighs.get(n.address) !== n.mac)
        nl.deleteNeigh({ index, address: n.address });
    }
    for (const [address, mac] of neighs) nl.setNeigh({ index, address, mac });
    for (const e of nl.fdb({ index })) {
      if (e.dst !== undefined && fdb.get(e.mac) !== e.dst) nl.deleteFdb({ index, mac: e.mac, dst: e.dst });
    }
    for (const [mac, dst] of fdb) nl.setFdb({ index, mac, dst });
    return status;
  }

  async stop(): Promise<void> {
    this.#index = 0;
  }
}
