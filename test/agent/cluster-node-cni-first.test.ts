/**
 * Issue 17 / decision 22: a join of many peers reaches the overlay in slices of at most 64 peers
 * (`PEER_SLICE` in src/agent/startup/cluster-node.ts), and while a CNI call is in flight the next
 * slice waits (`#letCniFirst`, at most CNI_FIRST_MAX_MS = 25 ms). Both bound how long an ADD waits
 * behind peer programming (bench/README.md, "Run F"). A real etcd, a real ClusterNode and a real
 * VXLAN overlay in a throwaway node namespace; only `updatePeers` is watched on its way through.
 *
 * Fails when the slices grow past 64 peers (a transaction of 100 records arrives as one batch) or
 * when the wait for CNI calls is removed (slices then follow each other without a gap).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../../bed/etcd.js';
import { silentLogger } from '../../src/agent/log.js';
import { ClusterNode } from '../../src/agent/startup/cluster-node.js';
import { EtcdGateway } from '../../src/cluster/etcd-gateway.js';
import { EtcdKeys, EtcdKv, type TxnOp } from '../../src/cluster/etcd-kv.js';
import type { PeerChanges } from '../../src/datapath/overlay/overlay.js';
import { VXLAN_DEVICE, VxlanOverlay } from '../../src/datapath/overlay/vxlan-overlay.js';
import { openEtcdStore } from '../cluster/etcd-harness.js';
import { type BedNode, OverlayBed } from '../datapath/overlay-bed.js';

const PREFIX = '/pwt/cni-first';
const PEERS = 200;

function peer(i: number): { name: string; value: string } {
  const name = `cf-${String(i).padStart(3, '0')}`;
  const record = { name, underlayIP: `192.168.90.${i + 1}`, podCIDRs: [`10.247.${i}.0/24`] };
  return { name, value: JSON.stringify(record) };
}

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(50);
  }
}

describe('membership: peer programming in slices, CNI calls first', () => {
  let etcd: EtcdServer;
  let bed: OverlayBed;
  let self: BedNode;

  before(async () => {
    etcd = await EtcdServer.start();
    bed = await OverlayBed.create(4);
    self = bed.nodes[0] as BedNode;
  });
  after(async () => {
    await bed?.cleanup();
    await etcd?.cleanup();
  });

  test('a join of 200 peers goes in slices of at most 64, each waiting while a CNI call is in flight', async () => {
    const store = await openEtcdStore(etcd, PREFIX);
    const gateway = new EtcdGateway({
      endpoints: [etcd.endpoint],
      requestTimeoutMs: 5000,
      connect: etcd.connect,
    });
    const overlay = new VxlanOverlay({
      nl: self.nl,
      nodeName: self.name,
      uplinkIndex: self.uplinkIndex,
      underlayIP: self.underlayIP,
      uplinkMtu: 1500,
      podCIDRs: self.podCIDRs,
    });
    const slices: Array<{ size: number; at: number; busy: boolean }> = [];
    let busy = false;
    const update = overlay.updatePeers.bind(overlay);
    overlay.updatePeers = (changes: PeerChanges) => {
      slices.push({ size: changes.put.length + changes.removed.length, at: performance.now(), busy });
      return update(changes);
    };
    let node: ClusterNode | undefined;
    const routes = async () =>
      (await bed.view(self, VXLAN_DEVICE)).routes.filter((r) => r.startsWith('10.247.')).length;
    try {
      await overlay.start();
      node = new ClusterNode(
        {
          store,
          nodeName: self.name,
          underlayIP: self.underlayIP,
          stateDir: '/nonexistent-unused',
          log: silentLogger,
        },
        overlay,
        { name: self.name, underlayIP: self.underlayIP, podCIDRs: self.podCIDRs },
      );
      node.yieldTo(() => busy);
      node.start();
      await until('the node is registered and listed', async () => node?.status().registered === true, 5000);
      await sleep(200); // the first full converge (no peers) is done

      // A CNI call "in flight" for the whole join: every slice after the first waits its 25 ms.
      busy = true;
      // Transactions of 100 (etcd takes at most 128 operations in one): each arrives as one batch.
      const keys = new EtcdKeys(PREFIX);
      const kv = new EtcdKv(gateway);
      for (let start = 0; start < PEERS; start += 100) {
        const ops: TxnOp[] = [];
        for (let i = start; i < start + 100; i++)
          ops.push({ put: keys.node(peer(i).name), value: peer(i).value });
        await kv.txn({ compare: [], success: ops });
      }
      await until('every peer is routed', async () => (await routes()) === PEERS, 10_000);
      busy = false;

      const join = slices.filter((s) => s.busy && s.size > 0);
      assert.ok(join.length >= 4, `200 peers in ${join.length} slices`);
      const total = join.reduce((n, s) => n + s.size, 0);
      assert.equal(total, PEERS, 'every peer went to the overlay once');
      for (const s of join) assert.ok(s.size <= 64, `a slice of ${s.size} peers (at most 64)`);
      // Each slice waits up to 25 ms (then goes anyway, so a node that is never quiet converges).
      for (let i = 1; i < join.length; i++) {
        const gap = (join[i]?.at ?? 0) - (join[i - 1]?.at ?? 0);
        assert.ok(
          gap >= 20,
          `slice ${i} began ${gap.toFixed(1)} ms after the one before (a CNI call in flight)`,
        );
      }
    } finally {
      busy = false;
      await node?.stop();
      await overlay.start();
      await overlay.setPeers([]);
      await store.close();
      gateway.destroy();
    }
  });
});
