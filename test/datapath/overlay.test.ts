/**
 * The Overlay compliance suite on both implementations, VXLAN (encap) and plain routes (noEncap),
 * each over an IPv4 and an IPv6 underlay.
 */
import assert from 'node:assert/strict';
import { ipJson } from '../../bed/exec.js';
import { formatIp } from '../../src/base/ip.js';
import { RoutedOverlay } from '../../src/datapath/overlay/routed-overlay.js';
import {
  VXLAN_DEVICE,
  VXLAN_PORT,
  VXLAN_VNI,
  VxlanOverlay,
  vtepMacFor,
} from '../../src/datapath/overlay/vxlan-overlay.js';
import { parseCidr } from '../../src/ipam/cidr.js';
import type { BedNode } from './overlay-bed.js';
import { UPLINK } from './overlay-bed.js';
import { type Expected, type OverlayImpl, overlayCompliance } from './overlay-compliance.js';

const UPLINK_MTU = 1500;

/** Whether two CIDRs share an address (the test's own arithmetic, not the overlay's). */
function overlaps(x: string, y: string): boolean {
  const [cx, cy] = [parseCidr(x), parseCidr(y)];
  if (cx.family !== cy.family) return false;
  const len = Math.min(cx.prefixLength, cy.prefixLength);
  const bits = cx.family === 4 ? 32 : 128;
  const mask = ((1n << BigInt(bits)) - 1n) ^ ((1n << BigInt(bits - len)) - 1n);
  return (cx.network & mask) === (cy.network & mask);
}

/** A peer CIDR that overlaps one of `self`'s pod CIDRs is skipped, by both implementations. */
function ownOverlap(self: BedNode, cidr: string): boolean {
  return self.podCIDRs.some((own) => overlaps(own, cidr));
}

function network(cidr: string): string {
  const c = parseCidr(cidr);
  return formatIp(c.family, c.network);
}

const VXLAN: OverlayImpl = {
  name: 'VxlanOverlay',
  device: VXLAN_DEVICE,
  families: () => [4, 6],
  make: (n: BedNode) =>
    new VxlanOverlay({
      nl: n.nl,
      nodeName: n.name,
      uplinkIndex: n.uplinkIndex,
      underlayIP: n.underlayIP,
      uplinkMtu: UPLINK_MTU,
      podCIDRs: n.podCIDRs,
    }),
  // Per peer CIDR: a route via its network address onlink, that address's permanent neighbour
  // entry with the peer's VTEP MAC; per peer: an FDB entry VTEP MAC -> underlay IP.
  expected: (self, peers): Expected => {
    const out: Expected = { routes: [], neighbours: [], fdb: [], skipped: [] };
    for (const p of peers) {
      const mac = p.vtepMac ?? vtepMacFor(p.name);
      for (const cidr of p.podCIDRs) {
        if (ownOverlap(self, cidr)) {
          if (!out.skipped.includes(p.name)) out.skipped.push(p.name);
          continue;
        }
        out.routes.push(`${cidr} via ${network(cidr)} dev ${VXLAN_DEVICE} onlink`);
        out.neighbours.push(`${network(cidr)} lladdr ${mac}`);
      }
      out.fdb.push(`${mac} dst ${p.underlayIP}`);
    }
    return out;
  },
  checkStarted: async (n, started) => {
    const mac = vtepMacFor(n.name);
    assert.equal(started.vtepMac, mac);
    const [link] = await ipJson<
      Array<{
        address: string;
        mtu: number;
        operstate: string;
        flags: string[];
        linkinfo: { info_kind: string; info_data: Record<string, unknown> };
      }>
    >(n.ns, ['-d', 'link', 'show', VXLAN_DEVICE]);
    assert.ok(link);
    assert.equal(link.address, mac);
    assert.equal(link.mtu, UPLINK_MTU - (n.underlayIP.includes(':') ? 70 : 50));
    assert.ok(link.flags.includes('UP'));
    assert.equal(link.linkinfo.info_kind, 'vxlan');
    const d = link.linkinfo.info_data;
    assert.equal(d.id, VXLAN_VNI);
    assert.equal(d.port, VXLAN_PORT);
    assert.equal(d.local ?? d.local6, n.underlayIP);
    assert.equal(d.link, UPLINK);
    assert.equal(d.learning, false);
    const addrs = await ipJson<Array<{ addr_info: Array<{ local: string; prefixlen: number }> }>>(n.ns, [
      'addr',
      'show',
      'dev',
      VXLAN_DEVICE,
    ]);
    const have = addrs
      .flatMap((l) => l.addr_info)
      .filter((a) => !a.local.startsWith('fe80:'))
      .map((a) => `${a.local}/${a.prefixlen}`)
      .sort();
    const want = n.podCIDRs.map((c) => `${network(c)}/${c.includes(':') ? 128 : 32}`).sort();
    assert.deepEqual(have, want, 'the VXLAN device holds the network address of each own pod CIDR');
  },
};

const ROUTED: OverlayImpl = {
  name: 'RoutedOverlay',
  device: UPLINK,
  // Only pod CIDRs of the underlay's family can be routed over it.
  families: (underlay) => [underlay],
  make: (n: BedNode) => new RoutedOverlay({ nl: n.nl, uplinkIndex: n.uplinkIndex, podCIDRs: n.podCIDRs }),
  // Per peer CIDR of the underlay's family: a route via the peer's underlay IP; other CIDRs skipped.
  expected: (self, peers): Expected => {
    const out: Expected = { routes: [], neighbours: [], fdb: [], skipped: [] };
    for (const p of peers) {
      const v6Underlay = p.underlayIP.includes(':');
      for (const cidr of p.podCIDRs) {
        if (cidr.includes(':') !== v6Underlay || ownOverlap(self, cidr)) {
          if (!out.skipped.includes(p.name)) out.skipped.push(p.name);
          continue;
        }
        out.routes.push(`${cidr} via ${p.underlayIP} dev ${UPLINK}`);
      }
    }
    return out;
  },
  checkStarted: async (_n, started) => {
    assert.deepEqual(started, {});
  },
};

for (const underlay of [4, 6] as const) {
  overlayCompliance(VXLAN, underlay);
  overlayCompliance(ROUTED, underlay);
}
