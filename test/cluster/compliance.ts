/**
 * The compliance suite of the ClusterStore seam (src/cluster/store.ts), run against every
 * implementation. A harness provides store instances over one shared backing ("open" twice = two
 * agents) and a way to make the backing hold a given set of nodes (writes for a writable store, a
 * rewritten file for the file store). What a store does not support, it must refuse clearly.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { registerNode } from '../../src/cluster/register.js';
import type { ClusterStore, NodeEvent, NodeRecord, PodCIDRPool } from '../../src/cluster/store.js';
import { EventLog, isCode, within } from './watch-log.js';

export interface ClusterStoreHarness {
  /** true: putNode/deleteNode/releasePodCIDRs work; false: they must be refused with ERR_STORE. */
  writable: boolean;
  /** true: leases come from the pool; false: they are the CIDRs the backing gives each node. */
  dynamicLease: boolean;
  open(): Promise<ClusterStore>;
  /** Makes the backing hold exactly these nodes (podCIDRs included, for a non-dynamic store). */
  setNodes(nodes: NodeRecord[]): Promise<void>;
  cleanup(): Promise<void>;
}

const POOL: PodCIDRPool = {
  clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/48'],
  nodeCIDRMaskSize: { ipv4: 24, ipv6: 64 },
};

function node(name: string, n: number, extra: Partial<NodeRecord> = {}): NodeRecord {
  return {
    name,
    underlayIP: `192.168.50.${n}`,
    podCIDRs: [`10.244.${n}.0/24`, `fd00:10:244:${n.toString(16)}::/64`],
    ...extra,
  };
}

export function clusterStoreCompliance(name: string, makeHarness: () => Promise<ClusterStoreHarness>): void {
  async function withStores(
    fn: (h: ClusterStoreHarness, open: () => Promise<ClusterStore>) => Promise<void>,
  ): Promise<void> {
    const harness = await makeHarness();
    const opened: ClusterStore[] = [];
    try {
      await fn(harness, async () => {
        const store = await harness.open();
        opened.push(store);
        return store;
      });
    } finally {
      try {
        for (const s of opened) await s.close();
      } finally {
        await harness.cleanup();
      }
    }
  }

  describe(`ClusterStore compliance: ${name}`, () => {
    test('get and list return canonical records sorted by name, with versions and a revision', () =>
      withStores(async (h, open) => {
        await h.setNodes([
          node('node-2', 2, { underlayIP: 'FD00:0:0::0A' }),
          node('node-1', 1, { vtepMac: '0A:58:00:00:00:01' }),
        ]);
        const store = await open();
        const list = await store.listNodes();
        assert.equal(typeof list.revision, 'string');
        assert.deepEqual(
          list.nodes.map((s) => s.node.name),
          ['node-1', 'node-2'],
        );
        assert.equal(list.nodes[1]?.node.underlayIP, 'fd00::a');
        assert.equal(list.nodes[0]?.node.vtepMac, '0a:58:00:00:00:01');
        const got = await store.getNode('node-1');
        assert.deepEqual(got, list.nodes[0]);
        assert.equal(await store.getNode('nope'), undefined);
        await assert.rejects(store.getNode('Bad_Name'), isCode('ERR_STORE', /Bad_Name/));
      }));

    test('health is ok with a since date', () =>
      withStores(async (_h, open) => {
        const health = (await open()).health();
        assert.equal(health.ok, true);
        assert.ok(health.since instanceof Date);
        assert.equal(health.error, undefined);
      }));

    test('a watch without since lists first, then follows puts and deletes; two watchers agree', () =>
      withStores(async (h, open) => {
        await h.setNodes([node('a', 1)]);
        const store = await open();
        const one = new EventLog(store);
        const two = new EventLog(store);
        try {
          await one.waitFor((e) => e.some((x) => x.type === 'put' && x.node.name === 'a'));
          await two.waitFor((e) => e.length >= 1);
          await h.setNodes([node('a', 1), node('b', 2)]);
          await one.waitFor((e) => e.some((x) => x.type === 'put' && x.node.name === 'b'));
          await h.setNodes([node('b', 2)]);
          const seen = await one.waitFor((e) => e.some((x) => x.type === 'delete'));
          const del = seen.find((x) => x.type === 'delete') as Extract<NodeEvent, { type: 'delete' }>;
          assert.deepEqual(del.node, node('a', 1));
          await two.waitFor((e) => e.length >= 3);
          assert.deepEqual(summary(one.events), ['put a', 'put b', 'delete a']);
          assert.deepEqual(summary(two.events), summary(one.events));
        } finally {
          await one.stop();
          await two.stop();
        }
      }));

    test('a watch from a list sends only what changed after it, and ends on abort', () =>
      withStores(async (h, open) => {
        await h.setNodes([node('a', 1), node('b', 2)]);
        const store = await open();
        const since = await store.listNodes();
        const log = new EventLog(store, since);
        await h.setNodes([node('a', 1), node('b', 2, { underlayIP: '192.168.50.22' }), node('c', 3)]);
        const events = await log.waitFor((e) => e.length >= 2);
        assert.deepEqual(summary(events), ['put b', 'put c']);
        const putB = events[0] as Extract<NodeEvent, { type: 'put' }>;
        assert.equal(putB.node.underlayIP, '192.168.50.22');
        assert.notEqual(putB.version, since.nodes[1]?.version);
        await within(5000, log.stop(), 'the watch ends after abort');
      }));

    test('close is idempotent, ends watches, and later calls fail naming the store as closed', () =>
      withStores(async (_h, open) => {
        const store = await open();
        const log = new EventLog(store);
        await store.close();
        await store.close();
        await within(5000, log.done, 'the watch ends after close');
        for (const call of [
          () => store.getNode('a'),
          () => store.listNodes(),
          () => store.putNode(node('a', 1), 'absent'),
          () => store.deleteNode('a'),
          () => store.leasePodCIDRs('a', POOL),
          () => store.releasePodCIDRs('a'),
        ]) {
          await assert.rejects(call(), isCode('ERR_STORE', /closed/));
        }
        // A store may refuse when the watch is created or on its first step: both count.
        await assert.rejects(
          async () => {
            for await (const _ of store.watchNodes({ signal: AbortSignal.timeout(5000) })) break;
          },
          isCode('ERR_STORE', /closed/),
        );
      }));

    test('a bad pool is a configuration error naming the key', () =>
      withStores(async (h, open) => {
        await h.setNodes([node('a', 1)]);
        const store = await open();
        await assert.rejects(
          store.leasePodCIDRs('a', { clusterCIDRs: ['10.244.0.0/16'], nodeCIDRMaskSize: { ipv4: 8 } }),
          isCode('ERR_INVALID_CONFIG', /nodeCIDRMaskSize\.ipv4/),
        );
        await assert.rejects(
          store.leasePodCIDRs('a', { clusterCIDRs: ['10.244.0.1/16'], nodeCIDRMaskSize: { ipv4: 24 } }),
          isCode('ERR_INVALID_CONFIG', /clusterCIDRs\[0\].*host bits/),
        );
      }));

    test('a lease is stable: the same CIDRs on every call and from every instance', () =>
      withStores(async (h, open) => {
        await h.setNodes([node('a', 1), node('b', 2)]);
        const [s1, s2] = [await open(), await open()];
        const a1 = await s1.leasePodCIDRs('a', POOL);
        const b1 = await s2.leasePodCIDRs('b', POOL);
        assert.equal(a1.length, 2);
        assert.match(a1[0] ?? '', /^10\.244\.\d+\.0\/24$/);
        assert.match(a1[1] ?? '', /^fd00:10:244:[0-9a-f:]*\/64$/);
        assert.notDeepEqual(a1, b1);
        assert.deepEqual(await s2.leasePodCIDRs('a', POOL), a1);
        assert.deepEqual(await s1.leasePodCIDRs('b', POOL), b1);
        if (!h.dynamicLease) assert.deepEqual(a1, node('a', 1).podCIDRs);
      }));

    test('registerNode publishes a record once and writes nothing when the store agrees', () =>
      withStores(async (h, open) => {
        await h.setNodes([node('a', 1)]);
        const store = await open();
        const before = await store.getNode('a');
        const same = await registerNode(store, { ...node('a', 1), vtepMac: undefined });
        assert.deepEqual(same, before);
        if (!h.writable) {
          await assert.rejects(
            registerNode(store, node('a', 1, { underlayIP: '192.168.50.99' })),
            isCode('ERR_STORE', /read-only/),
          );
          return;
        }
        const moved = await registerNode(
          store,
          node('a', 1, { underlayIP: '192.168.50.99', vtepMac: '0a:58:00:00:00:09' }),
        );
        assert.notEqual(moved.version, before?.version);
        assert.deepEqual(await store.getNode('a'), moved);
        const created = await registerNode(store, node('new', 7));
        assert.deepEqual((await store.getNode('new'))?.node, created.node);
      }));

    test('writes: compare-and-swap on the version, or refused clearly when read-only', () =>
      withStores(async (h, open) => {
        await h.setNodes([node('a', 1)]);
        const store = await open();
        if (!h.writable) {
          await assert.rejects(store.putNode(node('z', 9), 'absent'), isCode('ERR_STORE', /read-only/));
          await assert.rejects(store.deleteNode('a'), isCode('ERR_STORE', /read-only/));
          await assert.rejects(store.releasePodCIDRs('a'), isCode('ERR_STORE', /read-only/));
          return;
        }
        const other = await open();
        const created = await store.putNode(node('z', 9), 'absent');
        assert.ok(created.ok);
        const again = await other.putNode(node('z', 10), 'absent');
        assert.deepEqual(again, { ok: false, current: { node: node('z', 9), version: created.version } });
        const updated = await other.putNode(node('z', 10), { version: created.version });
        assert.ok(updated.ok);
        assert.notEqual(updated.version, created.version);
        const stale = await store.putNode(node('z', 11), { version: created.version });
        assert.equal(stale.ok, false);
        assert.deepEqual(stale.ok ? undefined : stale.current?.node, node('z', 10));
        await assert.rejects(
          store.putNode({ ...node('y', 1), underlayIP: '300.1.1.1' }, 'absent'),
          isCode('ERR_STORE', /underlayIP/),
        );
        await assert.rejects(store.putNode(node('y', 1), { version: 'x' }), isCode('ERR_STORE', /version/));
        assert.equal(await store.deleteNode('z', { ifVersion: created.version }), false);
        assert.equal(await store.deleteNode('z', { ifVersion: updated.version }), true);
        assert.equal(await store.deleteNode('z'), false);
        assert.equal(await store.getNode('z'), undefined);
      }));

    test('release frees a node’s CIDRs; they are leased again afterwards', () =>
      withStores(async (h, open) => {
        if (!h.dynamicLease) return;
        const store = await open();
        const a = await store.leasePodCIDRs('a', POOL);
        assert.deepEqual(await store.releasePodCIDRs('a'), a);
        assert.deepEqual(await store.releasePodCIDRs('a'), []);
        const b = await store.leasePodCIDRs('b', POOL);
        assert.deepEqual(b, a, 'deterministic order: the freed CIDRs are the first free ones');
        assert.notDeepEqual(await store.leasePodCIDRs('a', POOL), b);
      }));
  });
}

function summary(events: NodeEvent[]): string[] {
  return events.map((e) => `${e.type} ${e.node.name}`);
}
