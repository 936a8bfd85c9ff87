/**
 * Issue 17: between deltas, the membership converges the peers in full: every `resyncMs` (the safety
 * net) and when the store comes back after an outage. Shown by drift the deltas cannot see: a peer
 * route deleted behind the agent's back comes back. A real etcd, a real ClusterNode with a VXLAN
 * overlay in a throwaway node namespace.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../../bed/etcd.js';
import { must } from '../../bed/exec.js';
import { silentLogger } from '../../src/agent/log.js';
import { ClusterNode } from '../../src/agent/startup/cluster-node.js';
import type { EtcdStore } from '../../src/cluster/etcd-store.js';
import { VXLAN_DEVICE, VxlanOverlay } from '../../src/datapath/overlay/vxlan-overlay.js';
import { openEtcdStore } from '../cluster/etcd-harness.js';
import { type BedNode, OverlayBed } from '../datapath/overlay-bed.js';

const PEER = { name: 'node-peer', underlayIP: '192.168.77.30', podCIDRs: ['10.246.8.0/24'] };
const ROUTE = `10.246.8.0/24 via 10.246.8.0 dev ${VXLAN_DEVICE} onlink`;

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<number> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(50);
  }
  return Date.now() - t0;
}

describe('membership: full converge after a reconnect and periodically', () => {
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

  async function withNode(resyncMs: number, fn: (store: EtcdStore) => Promise<void>): Promise<void> {
    seq++;
    const store = await openEtcdStore(etcd, `/pwt/resync-${seq}`);
    const overlay = new VxlanOverlay({
      nl: self.nl,
      nodeName: self.name,
      uplinkIndex: self.uplinkIndex,
      underlayIP: self.underlayIP,
      uplinkMtu: 1500,
      podCIDRs: self.podCIDRs,
    });
    let node: ClusterNode | undefined;
    try {
      await overlay.start();
      node = new ClusterNode(
        {
          store,
          nodeName: self.name,
          underlayIP: self.underlayIP,
          stateDir: '/nonexistent-unused',
          log: silentLogger,
          resyncMs,
        },
        overlay,
        { name: self.name, underlayIP: self.underlayIP, podCIDRs: self.podCIDRs },
      );
      node.start();
      assert.ok((await store.putNode(PEER, 'absent')).ok);
      await until('the peer is routed', async () => (await routes()).includes(ROUTE), 5000);
      await fn(store);
    } finally {
      await node?.stop();
      await overlay.start();
      await overlay.setPeers([]);
      await store.close();
    }
  }

  const routes = async () => (await bed.view(self, VXLAN_DEVICE)).routes;
  const dropRoute = () => must('ip', ['-n', self.ns, 'route', 'del', '10.246.8.0/24', 'dev', VXLAN_DEVICE]);

  test('a route deleted behind its back comes back at the next periodic converge', async () => {
    await withNode(700, async () => {
      await dropRoute();
      assert.ok(!(await routes()).includes(ROUTE));
      await until('the route is back', async () => (await routes()).includes(ROUTE), 3000);
    });
  });

  test('after a store outage the peers are converged in full (the route comes back)', async () => {
    // The safety net far away: only the reconnect can bring the route back within the test.
    await withNode(10 * 60_000, async (store) => {
      await dropRoute();
      etcd.pause();
      try {
        await until('the store is seen down', async () => !store.health().ok, 5000);
      } finally {
        etcd.resume();
      }
      await until(
        'the route is back after the reconnect',
        async () => (await routes()).includes(ROUTE),
        5000,
      );
    });
  });
});
