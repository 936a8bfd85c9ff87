import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../../bed/etcd.js';
import type { PodwireError } from '../../src/base/errors.js';
import { isPrefix, parsePrefix, prefixContains } from '../../src/base/ip.js';
import { EtcdStore } from '../../src/cluster/etcd-store.js';
import type { ClusterStore, NodeRecord, PodCIDRPool } from '../../src/cluster/store.js';
import { clusterStoreCompliance } from './compliance.js';
import { etcdForFile, FAST, openEtcdStore, setNodes } from './etcd-harness.js';
import { EventLog, isCode } from './watch-log.js';

/** One etcd for the whole file; each test works under its own key prefix. */
const { server, freshPrefix } = etcdForFile('t');

/** Opens stores under one prefix and closes them all afterwards, pass or fail. */
async function withStores(
  fn: (open: () => Promise<EtcdStore>, s: EtcdServer, prefix: string) => Promise<void>,
): Promise<void> {
  const s = await server();
  const prefix = freshPrefix();
  const opened: EtcdStore[] = [];
  try {
    await fn(
      async () => {
        const store = await openEtcdStore(s, prefix);
        opened.push(store);
        return store;
      },
      s,
      prefix,
    );
  } finally {
    for (const store of opened) await store.close();
  }
}

clusterStoreCompliance('etcd', async () => {
  const s = await server();
  const prefix = freshPrefix();
  const admin = await openEtcdStore(s, prefix);
  return {
    writable: true,
    dynamicLease: true,
    open: () => openEtcdStore(s, prefix),
    setNodes: (nodes: NodeRecord[]) => setNodes(admin, nodes),
    cleanup: () => admin.close(),
  };
});

const DUAL: PodCIDRPool = {
  clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/48'],
  nodeCIDRMaskSize: { ipv4: 24, ipv6: 64 },
};

function b64(text: string): string {
  return Buffer.from(text).toString('base64');
}

describe('EtcdStore: pod CIDR leases', () => {
  test('5 agents leasing at the same instant against an empty etcd get 5 distinct CIDRs, kept across an etcd restart', async () => {
    const s = await EtcdServer.start();
    const stores: ClusterStore[] = [];
    try {
      const names = ['n1', 'n2', 'n3', 'n4', 'n5'];
      for (const _ of names) stores.push(await openEtcdStore(s, '/podwire'));
      // All five calls are issued in the same tick: they race for the same first candidate.
      const leased = await Promise.all(
        names.map((n, i) => (stores[i] as ClusterStore).leasePodCIDRs(n, DUAL)),
      );
      const v4 = leased.map((l) => l[0]);
      const v6 = leased.map((l) => l[1]);
      assert.equal(new Set(v4).size, 5, `distinct IPv4: ${v4}`);
      assert.equal(new Set(v6).size, 5, `distinct IPv6: ${v6}`);
      assert.deepEqual([...v4].sort(), [
        '10.244.0.0/24',
        '10.244.1.0/24',
        '10.244.2.0/24',
        '10.244.3.0/24',
        '10.244.4.0/24',
      ]);
      for (const store of stores.splice(0)) await store.close();

      await s.stop();
      await s.restart();
      for (const _ of names) stores.push(await openEtcdStore(s, '/podwire'));
      const again = await Promise.all(
        names.map((n, i) => (stores[i] as ClusterStore).leasePodCIDRs(n, DUAL)),
      );
      assert.deepEqual(again, leased);
    } finally {
      for (const store of stores) await store.close();
      await s.cleanup();
    }
  });

  test('a /16 in /24s: 4 racing clients lease all 256 exactly once, then exhaustion names the pool', () =>
    withStores(async (open) => {
      const pool: PodCIDRPool = { clusterCIDRs: ['10.250.0.0/16'], nodeCIDRMaskSize: { ipv4: 24 } };
      const clients = await Promise.all([open(), open(), open(), open()]);
      const byNode = new Map<string, string[]>();
      await Promise.all(
        clients.map(async (store, c) => {
          for (let i = c; i < 256; i += clients.length) {
            byNode.set(`node-${i}`, await store.leasePodCIDRs(`node-${i}`, pool));
          }
        }),
      );
      const all = [...byNode.values()].flat();
      assert.equal(all.length, 256);
      assert.equal(new Set(all).size, 256);
      const outer = parsePrefix('10.250.0.0/16');
      for (const c of all) {
        const p = parsePrefix(c);
        assert.ok(isPrefix(p) && isPrefix(outer) && p.length === 24 && prefixContains(outer, p), c);
      }
      await assert.rejects(
        (clients[0] as ClusterStore).leasePodCIDRs('one-too-many', pool),
        isCode(
          'ERR_STORE',
          /no free pod CIDR for node one-too-many: every 10\.250\.0\.0\/16 as \/24s is leased/,
        ),
      );
      // A full pool still gives holders their own CIDRs back, from any client.
      assert.deepEqual(
        await (clients[2] as ClusterStore).leasePodCIDRs('node-7', pool),
        byNode.get('node-7'),
      );
    }));

  test('dual-stack follows the order of clusterCIDRs; a node keeps its IPv4 CIDR when IPv6 is added', () =>
    withStores(async (open) => {
      const store = await open();
      const v6first: PodCIDRPool = {
        clusterCIDRs: ['fd00:1::/56', '10.1.0.0/16'],
        nodeCIDRMaskSize: { ipv4: 26, ipv6: 64 },
      };
      assert.deepEqual(await store.leasePodCIDRs('a', v6first), ['fd00:1::/64', '10.1.0.0/26']);
      const v4only: PodCIDRPool = { clusterCIDRs: ['10.2.0.0/16'], nodeCIDRMaskSize: { ipv4: 24 } };
      assert.deepEqual(await store.leasePodCIDRs('b', v4only), ['10.2.0.0/24']);
      const both: PodCIDRPool = {
        clusterCIDRs: ['10.2.0.0/16', 'fd00:2::/48'],
        nodeCIDRMaskSize: { ipv4: 24, ipv6: 64 },
      };
      assert.deepEqual(await store.leasePodCIDRs('b', both), ['10.2.0.0/24', 'fd00:2::/64']);
      const twoV4: PodCIDRPool = {
        clusterCIDRs: ['10.3.0.0/24', '10.4.0.0/24'],
        nodeCIDRMaskSize: { ipv4: 25 },
      };
      const got = [];
      for (const n of ['c1', 'c2', 'c3', 'c4']) got.push(...(await store.leasePodCIDRs(n, twoV4)));
      assert.deepEqual(got, ['10.3.0.0/25', '10.3.0.128/25', '10.4.0.0/25', '10.4.0.128/25']);
    }));

  test('a held CIDR outside a changed pool is an error that says how to recover', () =>
    withStores(async (open) => {
      const store = await open();
      await store.leasePodCIDRs('a', { clusterCIDRs: ['10.5.0.0/16'], nodeCIDRMaskSize: { ipv4: 24 } });
      await assert.rejects(
        store.leasePodCIDRs('a', { clusterCIDRs: ['10.5.0.0/16'], nodeCIDRMaskSize: { ipv4: 25 } }),
        isCode('ERR_STORE', /node a holds 10\.5\.0\.0\/24.*podwire node remove a/),
      );
    }));
});

describe('EtcdStore: watch', () => {
  test('sees puts and deletes made by another client, with the writer’s versions', () =>
    withStores(async (open) => {
      const [watcher, writer] = [await open(), await open()];
      const log = new EventLog(watcher);
      try {
        const a = await writer.putNode(
          { name: 'a', underlayIP: '10.0.0.1', podCIDRs: ['10.244.0.0/24'] },
          'absent',
        );
        const b = await writer.putNode({ name: 'b', underlayIP: '10.0.0.2', podCIDRs: [] }, 'absent');
        assert.ok(a.ok && b.ok);
        const a2 = await writer.putNode(
          { name: 'a', underlayIP: '10.0.0.9', podCIDRs: ['10.244.0.0/24'] },
          { version: a.version },
        );
        assert.ok(a2.ok);
        assert.equal(await writer.deleteNode('b'), true);
        const events = await log.waitFor((e) => e.length === 4);
        assert.deepEqual(
          events.map((e) => [e.type, e.node.name, e.type === 'put' ? e.version : e.revision]),
          [
            ['put', 'a', a.version],
            ['put', 'b', b.version],
            ['put', 'a', a2.version],
            ['delete', 'b', String(Number(a2.version) + 1)],
          ],
        );
        const revisions = events.map((e) => Number(e.revision));
        assert.deepEqual(
          revisions,
          [...revisions].sort((x, y) => x - y),
        );
      } finally {
        await log.stop();
      }
    }));

  test('from a compacted revision it lists afresh and emits the difference', () =>
    withStores(async (open, s, prefix) => {
      const store = await open();
      await setNodes(store, [
        { name: 'keep', underlayIP: '10.0.0.1', podCIDRs: [] },
        { name: 'gone', underlayIP: '10.0.0.2', podCIDRs: [] },
        { name: 'moved', underlayIP: '10.0.0.3', podCIDRs: [] },
      ]);
      const since = await store.listNodes();
      await setNodes(store, [
        { name: 'keep', underlayIP: '10.0.0.1', podCIDRs: [] },
        { name: 'moved', underlayIP: '10.0.0.33', podCIDRs: [] },
        { name: 'new', underlayIP: '10.0.0.4', podCIDRs: [] },
      ]);
      const now = await store.listNodes();
      await s.call('/v3/kv/compaction', { revision: now.revision });
      const log = new EventLog(store, since);
      try {
        const events = await log.waitFor((e) => e.length === 3);
        assert.deepEqual(
          events.map((e) => `${e.type} ${e.node.name} ${e.node.underlayIP}@${e.revision}`),
          [
            `put moved 10.0.0.33@${now.revision}`,
            `put new 10.0.0.4@${now.revision}`,
            `delete gone 10.0.0.2@${now.revision}`,
          ],
        );
        await store.putNode({ name: 'later', underlayIP: '10.0.0.5', podCIDRs: [] }, 'absent');
        await log.waitFor((e) => e.length === 4 && e[3]?.node.name === 'later');
      } finally {
        await log.stop();
      }
      assert.ok(prefix.startsWith('/pwt/'));
    }));

  test('an invalid record written behind podwire’s back is skipped and reported', () =>
    withStores(async (_open, s, prefix) => {
      const reported: string[] = [];
      const store = await openEtcdStore(s, prefix, {
        onInvalidRecord: (key: string, err: PodwireError) => reported.push(`${key}: ${err.message}`),
      });
      try {
        await s.call('/v3/kv/put', {
          key: b64(`${prefix}/nodes/bad`),
          value: b64('{"name":"bad","underlayIP":"x"}'),
        });
        await s.call('/v3/kv/put', { key: b64(`${prefix}/nodes/junk`), value: b64('not json') });
        await store.putNode({ name: 'good', underlayIP: '10.0.0.1', podCIDRs: [] }, 'absent');
        assert.deepEqual(
          (await store.listNodes()).nodes.map((n) => n.node.name),
          ['good'],
        );
        assert.equal(reported.length, 2);
        assert.match(reported[0] ?? '', /nodes\/bad\.underlayIP/);
        assert.match(reported[1] ?? '', /nodes\/junk: not JSON/);
      } finally {
        await store.close();
      }
    }));
});

describe('EtcdStore: endpoints and options', () => {
  test('a refused endpoint is skipped for the next one', async () => {
    const s = await server();
    const store = await EtcdStore.open({
      endpoints: ['http://127.0.0.1:1', s.endpoint],
      connect: s.connect,
      prefix: freshPrefix(),
      ...FAST,
    });
    try {
      assert.equal((await store.listNodes()).nodes.length, 0);
      assert.equal(store.health().ok, true);
    } finally {
      await store.close();
    }
  });

  test('bad options are configuration errors naming the key', async () => {
    await assert.rejects(
      EtcdStore.open({ endpoints: [] }),
      isCode('ERR_INVALID_CONFIG', /cluster\.endpoints/),
    );
    await assert.rejects(
      EtcdStore.open({ endpoints: ['ftp://x:1'] }),
      isCode('ERR_INVALID_CONFIG', /cluster\.endpoints: ftp/),
    );
    await assert.rejects(
      EtcdStore.open({ endpoints: ['http://x:1'], prefix: 'podwire/' }),
      isCode('ERR_INVALID_CONFIG', /cluster\.prefix/),
    );
  });
});

describe('EtcdStore: resources', () => {
  test('opening, calling, watching and closing leave no descriptor behind', async () => {
    const s = await server();
    const prefix = freshPrefix();
    const fds = (): number => readdirSync('/proc/self/fd').length;
    const warm = await openEtcdStore(s, prefix);
    await warm.getNode('a');
    await warm.close();
    await sleep(100);
    const baseline = fds();
    for (let round = 0; round < 10; round++) {
      const store = await openEtcdStore(s, prefix);
      const log = new EventLog(store);
      await store.putNode({ name: `n${round}`, underlayIP: '10.0.0.1', podCIDRs: [] }, 'absent');
      await Promise.all(Array.from({ length: 20 }, () => store.listNodes()));
      await log.waitFor((e) => e.some((x) => x.node.name === `n${round}`));
      if (round % 2 === 0) await log.stop();
      await store.close();
      await log.done;
    }
    await sleep(200);
    assert.equal(fds(), baseline);
  });
});
