/**
 * Decision 23: large etcd answers never held whole. A prefix is read in pages at one revision (a
 * consistent snapshot, started again when a compaction overtakes it), and the node watch asks etcd
 * to fragment large responses, so that catching up after an outage delivers every event once, in
 * order, in messages no larger than etcd's request limit.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { EtcdServer } from '../../bed/etcd.js';
import { EtcdGateway } from '../../src/cluster/etcd-gateway.js';
import { b64, EtcdKeys, EtcdKv, type Kv, prefixEnd } from '../../src/cluster/etcd-kv.js';
import type { NodeRecord } from '../../src/cluster/store.js';
import { etcdForFile, openEtcdStore } from './etcd-harness.js';
import { EventLog } from './watch-log.js';

/**
 * etcd fragments a watch response above its request limit plus 512 KiB of gRPC allowance
 * (etcdserver/api/v3rpc: maxRequestBytes + grpcOverheadBytes): with 16 KiB, above 528 KiB.
 */
const MAX_REQUEST_BYTES = 16 * 1024;

/** One etcd for the whole file; each test works under its own key prefix. */
const { server, freshPrefix } = etcdForFile('paged', { maxRequestBytes: MAX_REQUEST_BYTES });

/** A gateway that runs `hook` after the n-th range answer it hands back (writes behind the reader's back). */
class HookedGateway extends EtcdGateway {
  ranges = 0;
  hook: ((n: number) => Promise<void>) | undefined;

  override async call<T>(
    path: string,
    body: unknown,
    signal?: AbortSignal,
    opts?: { readOnly?: boolean },
  ): Promise<T> {
    const res = await super.call<T>(path, body, signal, opts);
    if (path === '/v3/kv/range') {
      this.ranges++;
      await this.hook?.(this.ranges);
    }
    return res;
  }
}

async function withKv(fn: (kv: EtcdKv, gw: HookedGateway, s: EtcdServer) => Promise<void>): Promise<void> {
  const s = await server();
  const gw = new HookedGateway({ endpoints: [s.endpoint], requestTimeoutMs: 5000, connect: s.connect });
  try {
    await fn(new EtcdKv(gw), gw, s);
  } finally {
    gw.destroy();
  }
}

async function putAll(kv: EtcdKv, keys: string[]): Promise<string> {
  const res = await kv.txn({ compare: [], success: keys.map((k) => ({ put: k, value: `v-${k}` })) });
  return res.revision;
}

describe('etcd range in pages', () => {
  test('every key under the prefix, in key order, pageSize at a time, at the first page’s revision', () =>
    withKv(async (kv, gw) => {
      const prefix = freshPrefix();
      const keys = Array.from({ length: 10 }, (_, i) => `${prefix}/k${String(i).padStart(2, '0')}`);
      const written = await putAll(kv, [...keys, `${prefix}0/outside`]);
      const pages: Kv[][] = [];
      // After the first page, a key inside the prefix is added: a snapshot does not see it.
      gw.hook = async (n) => {
        if (n === 1) await putAll(kv, [`${prefix}/k05a`]);
      };
      const { revision } = await kv.rangePages(`${prefix}/`, { pageSize: 3, onPage: (p) => pages.push(p) });
      assert.equal(revision, written);
      assert.deepEqual(
        pages.map((p) => p.length),
        [3, 3, 3, 1],
      );
      assert.deepEqual(
        pages.flat().map((k) => k.key),
        keys,
      );
      assert.ok(pages.flat().every((k) => k.value === `v-${k.key}`));
    }));

  test('a compaction that overtakes the read starts it again at the newest revision', () =>
    withKv(async (kv, gw, s) => {
      const prefix = freshPrefix();
      await putAll(
        kv,
        Array.from({ length: 7 }, (_, i) => `${prefix}/a${i}`),
      );
      let kept: Kv[] = [];
      let restarts = 0;
      gw.hook = async (n) => {
        if (n !== 1) return;
        const rev = await putAll(kv, [`${prefix}/b`]);
        await s.call('/v3/kv/compaction', { revision: rev });
      };
      const { revision } = await kv.rangePages(`${prefix}/`, {
        pageSize: 3,
        onPage: (p) => kept.push(...p),
        onRestart: () => {
          restarts++;
          kept = [];
        },
      });
      assert.equal(restarts, 1);
      assert.deepEqual(
        kept.map((k) => k.key.slice(prefix.length + 1)),
        ['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'b'],
      );
      const now = (await kv.range(`${prefix}/`, { prefix: true })).revision;
      assert.equal(revision, now);
    }));

  test('EtcdStore.listNodes reads 1234 nodes in pages: all of them, sorted, at one revision', async () => {
    const s = await server();
    const prefix = freshPrefix();
    const store = await openEtcdStore(s, prefix);
    const gw = new EtcdGateway({ endpoints: [s.endpoint], requestTimeoutMs: 5000, connect: s.connect });
    try {
      const kv = new EtcdKv(gw);
      const keys = new EtcdKeys(prefix);
      const n = 1234;
      let revision = '';
      for (let start = 0; start < n; start += 50) {
        const ops = [];
        for (let i = start; i < Math.min(n, start + 50); i++) {
          const node: NodeRecord = {
            name: `n${String(i).padStart(4, '0')}`,
            underlayIP: `10.9.${i >> 8}.${i & 255}`,
            podCIDRs: [],
          };
          ops.push({ put: keys.node(node.name), value: JSON.stringify(node) });
        }
        revision = (await kv.txn({ compare: [], success: ops })).revision;
      }
      const list = await store.listNodes();
      assert.equal(list.nodes.length, n);
      assert.equal(list.revision, revision);
      assert.deepEqual(
        list.nodes.map((x) => x.node.name),
        Array.from({ length: n }, (_, i) => `n${String(i).padStart(4, '0')}`),
      );
    } finally {
      gw.destroy();
      await store.close();
    }
  });
});

describe('etcd node watch: fragmented responses', () => {
  test('a catch-up larger than etcd’s request limit comes in fragments: every event once, in order', async () => {
    const s = await server();
    const prefix = freshPrefix();
    const store = await openEtcdStore(s, prefix);
    const gw = new EtcdGateway({ endpoints: [s.endpoint], requestTimeoutMs: 5000, connect: s.connect });
    const kv = new EtcdKv(gw);
    const keys = new EtcdKeys(prefix);
    let log: EventLog | undefined;
    try {
      const since = await store.listNodes();
      // 100 transactions of 30 records (~15 KB each, under the limit); together ~1.5 MB of events.
      // Each record carries 400 bytes of a field this agent does not know (as a newer agent's would).
      const names: string[] = [];
      for (let t = 0; t < 100; t++) {
        const ops = [];
        for (let i = 0; i < 30; i++) {
          const name = `n${t}-${i}`;
          names.push(name);
          const node = { name, underlayIP: `10.8.${t}.${i + 1}`, podCIDRs: [], newerField: 'x'.repeat(400) };
          ops.push({ put: keys.node(name), value: JSON.stringify(node) });
        }
        await kv.txn({ compare: [], success: ops });
      }
      // etcd fragments this catch-up at all (else this test would show nothing).
      const ctl = new AbortController();
      let fragments = 0;
      let events = 0;
      const body = {
        create_request: {
          key: b64(keys.nodes),
          range_end: prefixEnd(keys.nodes),
          start_revision: String(BigInt(since.revision) + 1n),
          fragment: true,
        },
      };
      for await (const m of gw.stream('/v3/watch', body, ctl.signal)) {
        const r = (m as { result?: { fragment?: boolean; events?: unknown[] } }).result;
        if (r?.fragment === true) fragments++;
        events += r?.events?.length ?? 0;
        if (events >= names.length) break;
      }
      ctl.abort();
      assert.ok(fragments > 0, 'etcd fragmented the catch-up');

      log = new EventLog(store, since);
      const got = await log.waitFor((e) => e.length >= names.length, 20_000);
      assert.deepEqual(
        got.map((e) => `${e.type} ${e.node.name}`),
        names.map((n) => `put ${n}`),
      );
      // Nothing more (no event delivered twice), and the watch goes on after the catch-up.
      await store.putNode({ name: 'later', underlayIP: '10.8.200.1', podCIDRs: [] }, 'absent');
      const all = await log.waitFor((e) => e.some((x) => x.node.name === 'later'));
      assert.equal(all.length, names.length + 1);
    } finally {
      await log?.stop();
      gw.destroy();
      await store.close();
    }
  });
});
