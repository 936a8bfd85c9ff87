/**
 * The reflector (src/kube/reflector.ts) against a real kube-apiserver 1.20 and etcd (bed/kube-api.ts):
 * list+watch of Nodes, bookmarks, the API server stopped and restarted, an invalid object, and 410
 * Gone forced by compacting etcd while the watch is cut off (`--watch-cache=false`, where every
 * watch reads etcd) and the same with the watch cache on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeApiServer } from '../../bed/kube-api.js';
import { isMac } from '../../src/base/mac.js';
import { type ObjectMeta, Reflector } from '../../src/kube/reflector.js';
import { adminClient, freshNodes, Gate, nodeObject, Recorder, until } from './kube-harness.js';

interface TestNode {
  name: string;
  rv: string;
  labels: Record<string, string>;
  vtepMac: string | undefined;
}

const MAC_ANNOTATION = 'podwire.io/vtep-mac';

/** The consumer's decode: the VTEP MAC annotation, when present, must be a MAC. */
function decodeNode(object: unknown, meta: ObjectMeta): TestNode {
  const m = (
    object as { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } }
  ).metadata;
  const mac = m.annotations?.[MAC_ANNOTATION];
  if (mac !== undefined && !isMac(mac))
    throw new Error(`annotation ${MAC_ANNOTATION}: not a MAC: ${JSON.stringify(mac)}`);
  return { name: meta.name, rv: meta.resourceVersion, labels: m.labels ?? {}, vtepMac: mac };
}

function cacheMatches(r: Reflector<TestNode>, fresh: Map<string, string>): boolean {
  return r.size === fresh.size && [...fresh].every(([name, rv]) => r.get(name)?.rv === rv);
}

describe('reflector: a real kube-apiserver, watch cache on', { timeout: 240_000 }, () => {
  let server: KubeApiServer;
  before(async () => {
    server = await KubeApiServer.start();
  });
  after(async () => {
    await server?.cleanup();
  });

  it('lists, then sees Nodes created, updated and deleted', async () => {
    await server.apply(nodeObject('a1'), nodeObject('a2'));
    const rec = new Recorder<TestNode>();
    const client = adminClient(server);
    const r = new Reflector<TestNode>({
      client,
      path: '/api/v1/nodes',
      decode: decodeNode,
      log: rec.log,
      pageSize: 1,
    });
    r.subscribe(rec.onEvent);
    r.start();
    try {
      await r.waitSynced();
      assert.deepEqual(r.keys().sort(), ['a1', 'a2']);
      assert.equal(r.stats.lists, 1);
      await server.apply(nodeObject('a3'));
      await server.kubectlOk(['label', 'node', 'a1', 'zone=z1']);
      await server.kubectlOk(['delete', 'node', 'a2']);
      await until(
        () => rec.events.length >= 5,
        'five events',
        20_000,
        () => rec.summary().join(', '),
      );
      assert.deepEqual(rec.summary(), ['added a1', 'added a2', 'added a3', 'modified a1', 'deleted a2']);
      assert.equal(r.get('a1')?.labels.zone, 'z1');
      assert.equal(r.get('a2'), undefined);
      assert.ok(cacheMatches(r, await freshNodes(server)));
      await server.kubectlOk(['delete', 'node', 'a1', 'a3']);
      await until(() => r.size === 0, 'cache empty');
    } finally {
      await r.stop();
      client.close();
    }
  });

  it('a label selector: only matching Nodes enter the cache', async () => {
    await server.apply(nodeObject('s1', { labels: { role: 'w' } }), nodeObject('s2'));
    const rec = new Recorder<TestNode>();
    const client = adminClient(server);
    const r = new Reflector<TestNode>({
      client,
      path: '/api/v1/nodes',
      labelSelector: 'role=w',
      decode: decodeNode,
      log: rec.log,
    });
    r.start();
    try {
      await r.waitSynced();
      assert.deepEqual(r.keys(), ['s1']);
      await server.kubectlOk(['label', 'node', 's2', 'role=w']);
      await until(() => r.size === 2, 's2 enters when labelled');
    } finally {
      await r.stop();
      client.close();
      await server.kubectlOk(['delete', 'node', 's1', 's2']);
    }
  });

  it('bookmarks move the resourceVersion past the last event delivered', async () => {
    // A watch with a selector sees only its own Nodes; changes to the others move the API server's
    // resourceVersion, and only a bookmark tells this watch about them. (1.20's watch cache sends a
    // bookmark shortly before a watch's timeout, with the last resourceVersion it processed for
    // Nodes: a short timeout makes one soon.)
    await server.apply(nodeObject('b1', { labels: { role: 'bm' } }));
    const rec = new Recorder<TestNode>();
    const client = adminClient(server);
    const r = new Reflector<TestNode>({
      client,
      path: '/api/v1/nodes',
      labelSelector: 'role=bm',
      decode: decodeNode,
      log: rec.log,
      watchTimeoutSeconds: 8,
    });
    r.start();
    try {
      await r.waitSynced();
      const nodeRv = r.get('b1')?.rv;
      assert.ok(nodeRv);
      await until(() => r.stats.watches > 0, 'watching');
      for (let i = 0; i < 3; i++) await server.apply(nodeObject(`other-${i}`));
      // a bookmark sent after the others' changes carries a resourceVersion past b1's, the last event
      // this watch saw (under load one can be missed before a watch's deadline: give it several)
      await until(
        () => r.stats.bookmarks > 0 && Number(r.resourceVersion) > Number(nodeRv),
        'a bookmark past the last event delivered',
        60_000,
        () => JSON.stringify({ rv: r.resourceVersion, nodeRv, stats: r.stats }),
      );
      assert.ok(Number(r.resourceVersion) > Number(nodeRv));
      assert.deepEqual(r.keys(), ['b1']);
      assert.equal(r.stats.lists, 1, 'no relist');
    } finally {
      await r.stop();
      client.close();
      await server.kubectlOk(['delete', 'node', '--ignore-not-found', 'b1', 'other-0', 'other-1', 'other-2']);
    }
  });

  it('an invalid object is skipped with a log line and a count; the others stay', async () => {
    await server.apply(nodeObject('v1', { annotations: { [MAC_ANNOTATION]: '02:00:00:00:00:01' } }));
    const rec = new Recorder<TestNode>();
    const client = adminClient(server);
    const r = new Reflector<TestNode>({ client, path: '/api/v1/nodes', decode: decodeNode, log: rec.log });
    r.subscribe(rec.onEvent);
    r.start();
    try {
      await r.waitSynced();
      await server.apply(nodeObject('v2', { annotations: { [MAC_ANNOTATION]: 'not-a-mac' } }));
      await server.apply(nodeObject('v3'));
      await until(() => r.get('v3') !== undefined, 'v3 after the bad one');
      assert.equal(r.get('v2'), undefined);
      assert.equal(r.get('v1')?.vtepMac, '02:00:00:00:00:01');
      assert.equal(r.stats.invalidObjects, 1);
      const line = rec.lines.find((l) => l.event === 'kube-object-invalid');
      assert.equal(line?.fields.name, 'v2');
      assert.match(String(line?.fields.reason), /vtep-mac: not a MAC: "not-a-mac"/);
      // v1 turned invalid: gone for the consumers (a delete), as the etcd store treats a bad record
      await server.kubectlOk(['annotate', '--overwrite', 'node', 'v1', `${MAC_ANNOTATION}=zz`]);
      await until(() => r.get('v1') === undefined, 'v1 dropped');
      assert.deepEqual(rec.summary(), ['added v1', 'added v3', 'deleted v1']);
      assert.equal(r.stats.invalidObjects, 2);
      // fixed again: back
      await server.kubectlOk([
        'annotate',
        '--overwrite',
        'node',
        'v1',
        `${MAC_ANNOTATION}=02:00:00:00:00:02`,
      ]);
      await until(() => r.get('v1')?.vtepMac === '02:00:00:00:00:02', 'v1 back');
    } finally {
      await r.stop();
      client.close();
      await server.kubectlOk(['delete', 'node', 'v1', 'v2', 'v3']);
    }
  });

  it('API server stopped: the cache keeps serving; restarted: it resyncs and matches a fresh list', async () => {
    await server.apply(nodeObject('r1'), nodeObject('r2'), nodeObject('r3'));
    const rec = new Recorder<TestNode>();
    const client = adminClient(server);
    const r = new Reflector<TestNode>({
      client,
      path: '/api/v1/nodes',
      decode: decodeNode,
      log: rec.log,
      backoff: { initialMs: 100, maxMs: 1000 },
    });
    r.subscribe(rec.onEvent);
    r.start();
    try {
      await r.waitSynced();
      await server.stop();
      // the first failure seen may be the open watch closing; the retries then find the port closed
      await until(
        () => /ECONNREFUSED/.test(r.health().error ?? ''),
        'health down: connection refused',
        20_000,
        () => String(r.health().error),
      );
      assert.equal(r.health().ok, false);
      assert.deepEqual(r.keys().sort(), ['r1', 'r2', 'r3'], 'the cache serves the last state');
      await server.restart();
      await server.kubectlOk(['delete', 'node', 'r2']);
      await server.kubectlOk(['label', 'node', 'r3', 'after=restart']);
      await server.apply(nodeObject('r4'));
      const fresh = await freshNodes(server);
      await until(
        () => r.health().ok && cacheMatches(r, fresh),
        'cache matches a fresh list',
        30_000,
        () => rec.summary().join(', '),
      );
      const gone = rec.lines.filter((l) => l.event === 'kube-watch-gone');
      const failed = rec.lines.find((l) => l.event === 'kube-watch-failed');
      console.log(`API server stopped: first failure seen: ${String(failed?.fields.error)}`);
      console.log(
        `API server restarted (watch cache on): relists ${r.stats.relists}, 410 seen as ${gone.map((g) => (g.fields.error ? 'HTTP 410' : 'ERROR event 410')).join(', ') || 'none'}`,
      );
      const after = rec.summary().slice(3);
      assert.deepEqual(after.sort(), ['added r4', 'deleted r2', 'modified r3']);
    } finally {
      await r.stop();
      client.close();
      // a failure while the server was stopped must not be hidden by the cleanup's own
      if (!server.running) await server.restart();
      await server.kubectlOk(['delete', 'node', '--all']);
    }
  });
});

/**
 * 410 forced: the watch is cut off, Nodes change, etcd is compacted, the watch comes back with its
 * old resourceVersion. With the watch cache off the API server asks etcd for that history and etcd
 * has compacted it: 410, and the reflector must relist and emit exactly the difference.
 */
for (const watchCache of [false, true]) {
  describe(`reflector: 410 Gone by etcd compaction, watch cache ${watchCache ? 'on' : 'off'}`, {
    timeout: 240_000,
  }, () => {
    let server: KubeApiServer;
    before(async () => {
      server = await KubeApiServer.start({ watchCache });
    });
    after(async () => {
      await server?.cleanup();
    });

    it('no event lost across the compaction', async () => {
      await server.apply(nodeObject('g1'), nodeObject('g2'), nodeObject('g3'));
      const rec = new Recorder<TestNode>();
      const gate = new Gate();
      const client = adminClient(server, gate);
      const r = new Reflector<TestNode>({
        client,
        path: '/api/v1/nodes',
        decode: decodeNode,
        log: rec.log,
        backoff: { initialMs: 100, maxMs: 500 },
      });
      r.subscribe(rec.onEvent);
      r.start();
      try {
        await r.waitSynced();
        await until(
          () => r.stats.watches > 0 || rec.lines.some((l) => l.event === 'kube-listed'),
          'watching',
        );
        gate.close();
        await until(() => !r.health().ok, 'cut off');
        await server.kubectlOk(['delete', 'node', 'g2']);
        await server.kubectlOk(['label', 'node', 'g1', 'while=away']);
        await server.apply(nodeObject('g4'));
        await server.compact();
        gate.open();
        const fresh = await freshNodes(server);
        await until(
          () => cacheMatches(r, fresh),
          'cache matches a fresh list',
          30_000,
          () => rec.summary().join(', '),
        );
        assert.deepEqual(rec.summary().slice(3).sort(), ['added g4', 'deleted g2', 'modified g1']);
        const gone = rec.lines.filter((l) => l.event === 'kube-watch-gone');
        if (!watchCache) {
          assert.equal(r.stats.relists, 1, 'one relist on 410');
          assert.equal(r.stats.lists, 2);
        }
        // What the API server did, for the record (the watch cache may serve the history itself).
        console.log(
          `watch cache ${watchCache ? 'on' : 'off'}: relists ${r.stats.relists}, 410 seen as ${gone.map((g) => (g.fields.error ? 'HTTP 410' : 'ERROR event 410')).join(', ') || 'none'}`,
        );
      } finally {
        await r.stop();
        client.close();
      }
    });
  });
}
