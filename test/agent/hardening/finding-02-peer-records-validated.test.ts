/**
 * Issue 15, finding 2: peer node records were trusted as they came: a record whose pod CIDRs lay
 * outside `clusterCIDRs`, overlapped another node's, or covered the underlay became routes (and
 * neighbour and FDB entries). Depends on src/agent/startup/peer-check.ts, used by ClusterNode
 * (src/agent/startup/cluster-node.ts) before anything reaches the overlay.
 *
 * A real etcd (its own namespace), a real ClusterNode with a VXLAN overlay in a throwaway node
 * namespace; the peer records are written into etcd as a rogue writer would.
 *
 * Found later in review (vtep-hijack): the check did not look at VTEP MACs, and a record copying
 * another peer's `vtepMac` took over that MAC's FDB entry (the smaller name wins it in
 * datapath/overlay/peer-table.ts), so the peer's pod traffic was tunnelled to the impostor. The
 * tests "a record copying a peer's VTEP MAC" depend on PeerCheck's MAC rule in
 * src/agent/startup/peer-check.ts (`this.#macs.get(mac)` in #check; at a fresh start, the `copies`
 * rank in `update`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../../../bed/etcd.js';
import type { Logger } from '../../../src/agent/log.js';
import { ClusterNode } from '../../../src/agent/startup/cluster-node.js';
import type { EtcdStore } from '../../../src/cluster/etcd-store.js';
import type { NodeRecord } from '../../../src/cluster/store.js';
import { VXLAN_DEVICE, VxlanOverlay, vtepMacFor } from '../../../src/datapath/overlay/vxlan-overlay.js';
import { openEtcdStore } from '../../cluster/etcd-harness.js';
import { type BedNode, OverlayBed } from '../../datapath/overlay-bed.js';

const CLUSTER_CIDRS = ['10.246.0.0/16', 'fd00:246::/48'];

/** A logger that keeps the warnings. */
function recordingLogger(warnings: Array<{ msg: string; fields?: Record<string, unknown> }>): Logger {
  const l: Logger = {
    info: () => undefined,
    warn: (msg, fields) => {
      warnings.push({ msg, ...(fields ? { fields } : {}) });
    },
    error: () => undefined,
    child: () => l,
  };
  return l;
}

async function until(what: string, check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(50);
  }
}

describe('finding 2: peer records are checked before they become routes', () => {
  let etcd: EtcdServer;
  let bed: OverlayBed;
  let self: BedNode;
  let seq = 0;

  before(async () => {
    etcd = await EtcdServer.start();
    bed = await OverlayBed.create(4);
    self = bed.nodes[0] as BedNode;
  });
  after(async () => {
    await bed?.cleanup();
    await etcd?.cleanup();
  });

  /**
   * A ClusterNode for `self` over a fresh prefix; `fn` runs with it, everything stopped after.
   * `seed`: records written before the node starts.
   */
  async function withNode(
    clusterCIDRs: string[] | undefined,
    fn: (ctx: { store: EtcdStore; node: ClusterNode; warnings: Array<{ msg: string }> }) => Promise<void>,
    seed: NodeRecord[] = [],
  ): Promise<void> {
    seq++;
    const store = await openEtcdStore(etcd, `/pwt/f02-${seq}`);
    for (const r of seed) await put(store, r);
    const overlay = new VxlanOverlay({
      nl: self.nl,
      nodeName: self.name,
      uplinkIndex: self.uplinkIndex,
      underlayIP: self.underlayIP,
      uplinkMtu: 1500,
      podCIDRs: self.podCIDRs,
    });
    const record: NodeRecord = { name: self.name, underlayIP: self.underlayIP, podCIDRs: self.podCIDRs };
    const warnings: Array<{ msg: string }> = [];
    let node: ClusterNode | undefined;
    try {
      await overlay.start();
      node = new ClusterNode(
        {
          store,
          nodeName: self.name,
          underlayIP: self.underlayIP,
          stateDir: '/nonexistent-unused',
          log: recordingLogger(warnings),
          ...(clusterCIDRs ? { clusterCIDRs } : {}),
        },
        overlay,
        record,
      );
      node.start();
      await fn({ store, node, warnings });
    } finally {
      await node?.stop();
      // Leave no peer entries behind for the next test.
      await overlay.start();
      await overlay.setPeers([]);
      await store.close();
    }
  }

  async function routes(): Promise<string[]> {
    return (await bed.view(self, VXLAN_DEVICE)).routes;
  }

  const put = async (store: EtcdStore, r: NodeRecord) => {
    const now = await store.getNode(r.name);
    const res = await store.putNode(r, now ? { version: now.version } : 'absent');
    assert.ok(res.ok, `put ${r.name}`);
  };

  test('with clusterCIDRs: outside them, overlapping this node, overlapping another node: refused, logged once, counted', async () => {
    await withNode(CLUSTER_CIDRS, async ({ store, node, warnings }) => {
      const good: NodeRecord = {
        name: 'node-good',
        underlayIP: '192.168.77.20',
        podCIDRs: ['10.246.5.0/24'],
      };
      await put(store, good);
      await until('the good peer is routed', async () =>
        (await routes()).some((r) => r.startsWith('10.246.5.0/24 ')),
      );
      const bad: NodeRecord[] = [
        { name: 'node-outside', underlayIP: '192.168.77.21', podCIDRs: ['10.99.0.0/24'] },
        { name: 'node-own', underlayIP: '192.168.77.22', podCIDRs: ['10.246.1.128/25'] },
        // Sorts before node-good: first come, first served, not by name.
        { name: 'node-dup', underlayIP: '192.168.77.23', podCIDRs: ['10.246.5.128/25'] },
      ];
      for (const r of bad) await put(store, r);
      await until('three refusals', async () => node.refusedTotal >= 3);
      await sleep(300);
      const view = await bed.view(self, VXLAN_DEVICE);
      assert.deepEqual(view.routes, [`10.246.5.0/24 via 10.246.5.0 dev ${VXLAN_DEVICE} onlink`]);
      assert.equal(view.neighbours.length, 1, 'one neighbour: the good peer');
      assert.equal(view.fdb.length, 1, 'one FDB entry: the good peer');
      const refused = node.status().refused;
      assert.deepEqual(
        refused.map((r) => r.name),
        ['node-dup', 'node-outside', 'node-own'],
      );
      assert.match(refused.find((r) => r.name === 'node-outside')?.reason ?? '', /outside clusterCIDRs/);
      assert.match(refused.find((r) => r.name === 'node-own')?.reason ?? '', /this node/);
      assert.match(refused.find((r) => r.name === 'node-dup')?.reason ?? '', /node node-good/);
      assert.equal(warnings.filter((w) => w.msg.startsWith('peer record refused')).length, 3);
      // The same bad record written again: not logged or counted again.
      await put(store, bad[0] as NodeRecord);
      await sleep(500);
      assert.equal(node.refusedTotal, 3);
      assert.equal(warnings.filter((w) => w.msg.startsWith('peer record refused')).length, 3);
      // The node it collided with leaves: the refused record is checked again and now accepted.
      await store.deleteNode('node-good');
      await until('node-dup routed once node-good is gone', async () =>
        (await routes()).some((r) => r.startsWith('10.246.5.128/25 ')),
      );
      assert.deepEqual(await routes(), [`10.246.5.128/25 via 10.246.5.128 dev ${VXLAN_DEVICE} onlink`]);
    });
  });

  test('without clusterCIDRs: a CIDR covering the underlay, and an underlay inside a pod CIDR, are refused', async () => {
    await withNode(undefined, async ({ store, node }) => {
      const good: NodeRecord = {
        name: 'node-good',
        underlayIP: '192.168.77.20',
        podCIDRs: ['10.246.5.0/24'],
      };
      await put(store, good);
      await put(store, { name: 'node-cover', underlayIP: '192.168.77.24', podCIDRs: ['192.168.77.0/24'] });
      await put(store, { name: 'node-cover-own', underlayIP: '10.200.0.5', podCIDRs: ['10.200.0.0/24'] });
      await put(store, { name: 'node-inside', underlayIP: '10.246.5.9', podCIDRs: ['10.246.6.0/24'] });
      await put(store, { name: 'node-same-ip', underlayIP: self.underlayIP, podCIDRs: ['10.246.7.0/24'] });
      await until('four refusals', async () => node.refusedTotal >= 4);
      await until('the good peer is routed', async () => (await routes()).length === 1);
      await sleep(300);
      assert.deepEqual(await routes(), [`10.246.5.0/24 via 10.246.5.0 dev ${VXLAN_DEVICE} onlink`]);
      const reasons = new Map(node.status().refused.map((r) => [r.name, r.reason]));
      assert.match(reasons.get('node-cover') ?? '', /covers the underlay address of this node/);
      assert.match(reasons.get('node-cover-own') ?? '', /covers its own underlay address/);
      assert.match(reasons.get('node-inside') ?? '', /lies inside the pod CIDRs of node node-good/);
      assert.match(reasons.get('node-same-ip') ?? '', /is this node's/);
    });
  });

  describe("a record copying a peer's VTEP MAC", () => {
    let peer: BedNode;
    let peerOverlay: VxlanOverlay;
    let real: NodeRecord;
    let impostor: NodeRecord;
    let mac: string;

    before(async () => {
      peer = bed.nodes[1] as BedNode;
      mac = vtepMacFor(peer.name);
      real = { name: peer.name, underlayIP: peer.underlayIP, podCIDRs: ['10.246.2.0/24'], vtepMac: mac };
      // Sorts before node-2: it would hold the FDB entry of node-2's MAC.
      impostor = {
        name: 'a-impostor',
        underlayIP: '192.168.77.9',
        podCIDRs: ['10.246.9.0/24'],
        vtepMac: mac,
      };
      // node-2's side of the tunnel, so that a ping between the two bed pods shows where the traffic goes.
      peerOverlay = new VxlanOverlay({
        nl: peer.nl,
        nodeName: peer.name,
        uplinkIndex: peer.uplinkIndex,
        underlayIP: peer.underlayIP,
        uplinkMtu: 1500,
        podCIDRs: ['10.246.2.0/24'],
      });
      await peerOverlay.start();
      await peerOverlay.setPeers([
        { name: self.name, underlayIP: self.underlayIP, podCIDRs: ['10.246.1.0/24'] },
      ]);
    });
    after(async () => {
      await peerOverlay?.setPeers([]);
      await peerOverlay?.stop();
    });

    const fdb = async (): Promise<string[]> => (await bed.view(self, VXLAN_DEVICE)).fdb;

    test("written while node-2 is accepted: refused, and node-2's MAC still leads to node-2", async () => {
      await withNode(CLUSTER_CIDRS, async ({ store, node, warnings }) => {
        await put(store, real);
        await until('node-2 in the FDB', async () => (await fdb()).includes(`${mac} dst ${peer.underlayIP}`));
        assert.ok(await bed.ping(self, '10.246.2.2'), 'node-1 pod -> node-2 pod before the impostor');
        await put(store, impostor);
        await until('the impostor refused', async () => node.refusedTotal >= 1);
        await sleep(300);
        assert.deepEqual(node.status().refused, [
          { name: 'a-impostor', reason: `VTEP MAC ${mac} is the VTEP MAC of node node-2` },
        ]);
        assert.equal(node.refusedTotal, 1, 'podwire_peer_records_refused_total');
        assert.equal(warnings.filter((w) => w.msg.startsWith('peer record refused')).length, 1);
        const view = await bed.view(self, VXLAN_DEVICE);
        assert.deepEqual(view.fdb, [`${mac} dst ${peer.underlayIP}`], 'the FDB entry still points at node-2');
        assert.deepEqual(view.routes, [`10.246.2.0/24 via 10.246.2.0 dev ${VXLAN_DEVICE} onlink`]);
        assert.ok(await bed.ping(self, '10.246.2.2'), 'node-1 pod -> node-2 pod with the impostor written');
        // node-2 leaves: the refused record is judged again, and now holds the MAC nobody else uses.
        await store.deleteNode(peer.name);
        await until('the impostor accepted once node-2 is gone', async () =>
          (await fdb()).includes(`${mac} dst 192.168.77.9`),
        );
        assert.deepEqual(node.status().refused, []);
      });
    });

    test('both present when the agent starts: node-2 keeps its MAC, though the impostor sorts first', async () => {
      await withNode(
        CLUSTER_CIDRS,
        async ({ node }) => {
          await until('the impostor refused', async () => node.refusedTotal >= 1);
          await until('node-2 in the FDB', async () => (await fdb()).length > 0);
          await sleep(300);
          assert.deepEqual(await fdb(), [`${mac} dst ${peer.underlayIP}`]);
          assert.deepEqual(
            node.status().refused.map((r) => r.name),
            ['a-impostor'],
          );
          assert.ok(await bed.ping(self, '10.246.2.2'), 'node-1 pod -> node-2 pod');
        },
        [impostor, real],
      );
    });
  });
});
