/**
 * The peer programming podwire had before issue 17, kept only so that `bench/cluster-scale.ts` can
 * measure it beside the current one in the same run (`legacyPeerProgramming` in the overlays'
 * options, set by the agent only when PODWIRE_BENCH_LEGACY_PEERS=1). Every change of the peer list
 * dumps the device's routes, neighbours and FDB and sets every neighbour and FDB entry again, one
 * request and one ack at a time, on the event loop: O(N) round trips per change.
 */
import { formatIp, parsePrefixOrThrow } from '../../base/ip.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { OverlayStatus, PeerNode } from './overlay.js';
import { convergeRoutes, overlapsOwn, type PeerRoute } from './peer-routes.js';

export function legacyVxlanSetPeers(
  nl: Rtnetlink,
  index: number,
  podCIDRs: readonly string[],
  peers: readonly PeerNode[],
  macOf: (p: PeerNode) => string,
): OverlayStatus {
  const status: OverlayStatus = { peers: [], skipped: [] };
  const routes: PeerRoute[] = [];
  const neighs = new Map<string, string>();
  const fdb = new Map<string, string>();
  const own = podCIDRs.map((c) => parsePrefixOrThrow(c));
  for (const p of peers) {
    const mac = macOf(p);
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
    if (n.mac === undefined || neighs.get(n.address) !== n.mac) nl.deleteNeigh({ index, address: n.address });
  }
  for (const [address, mac] of neighs) nl.setNeigh({ index, address, mac });
  for (const e of nl.fdb({ index })) {
    if (e.dst !== undefined && fdb.get(e.mac) !== e.dst) nl.deleteFdb({ index, mac: e.mac, dst: e.dst });
  }
  for (const [mac, dst] of fdb) nl.setFdb({ index, mac, dst });
  return status;
}

export function legacyRoutedSetPeers(
  nl: Rtnetlink,
  uplinkIndex: number,
  podCIDRs: readonly string[],
  peers: readonly PeerNode[],
): OverlayStatus {
  const status: OverlayStatus = { peers: [], skipped: [] };
  const routes: PeerRoute[] = [];
  const own = podCIDRs.map((c) => parsePrefixOrThrow(c));
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
  convergeRoutes(nl, uplinkIndex, routes);
  return status;
}
