/**
 * etcd going away and coming back: calls fail within a bound with ERR_STORE, health shows the outage
 * and recovers, and a watch resumes without losing or repeating an event, including events made
 * by another client before the watch reconnected, and including history compacted meanwhile.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../../bed/etcd.js';
import type { EtcdStore } from '../../src/cluster/etcd-store.js';
import type { NodeEvent, NodeRecord } from '../../src/cluster/store.js';
import { FAST, openEtcdStore } from './etcd-harness.js';
import { EventLog, isCode } from './watch-log.js';

function rec(name: string, n: number): NodeRecord {
  return { name, underlayIP: `10.0.0.${n}`, podCIDRs: [`10.244.${n}.0/24`] };
}

function summary(events: NodeEvent[]): string[] {
  return events.map((e) => `${e.type} ${e.node.name}`);
}

/** Polls until `pred` holds; returns how long it took. */
async function until(what: string, timeoutMs: number, pred: () => boolean): Promise<number> {
  const start = Date.now();
  while (!pred()) {
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(20);
  }
  return Date.now() - start;
}

/** Runs `call`, which must fail with ERR_STORE; returns how long it took to fail. */
async function failsWithin(boundMs: number, call: () => Promise<unknown>, re: RegExp): Promise<number> {
  const start = Date.now();
  await assert.rejects(call(), isCode('ERR_STORE', re));
  const took = Date.now() - start;
  assert.ok(took < boundMs, `failed after ${took} ms, bound ${boundMs} ms`);
  return took;
}

describe('EtcdStore: outages', () => {
  let server: EtcdServer;
  const stores: EtcdStore[] = [];
  const open = async (): Promise<EtcdStore> => {
    const s = await openEtcdStore(server, '/podwire');
    stores.push(s);
    return s;
  };
  before(async () => {
    server = await EtcdServer.start();
  });
  after(async () => {
    try {
      for (const s of stores) await s.close();
    } finally {
      await server.cleanup();
    }
  });

  test('etcd stopped for 3 s: calls fail fast, health shows it, the watch resumes without a gap', async (t) => {
    const [watcher, writer] = [await open(), await open()];
    const log = new EventLog(watcher);
    try {
      await writer.putNode(rec('n1', 1), 'absent');
      await log.waitFor((e) => e.length === 1);

      const stoppedAt = new Date();
      await server.stop();
      const refused = await failsWithin(
        FAST.requestTimeoutMs + 500,
        () => writer.getNode('n1'),
        /getNode: .*unreachable/,
      );
      await failsWithin(
        FAST.requestTimeoutMs + 500,
        () => writer.leasePodCIDRs('n9', { clusterCIDRs: ['10.9.0.0/16'], nodeCIDRMaskSize: { ipv4: 24 } }),
        /leasePodCIDRs/,
      );
      const noticed = await until('the watcher’s health goes down', 3000, () => !watcher.health().ok);
      const down = watcher.health();
      assert.match(down.error ?? '', /etcd http:\/\/127\.0\.0\.1:2379/);
      assert.ok(down.since >= stoppedAt);
      await sleep(3000 - noticed);

      const restartedAt = new Date();
      await server.restart();
      // Another agent changes things at once, before the watcher has had a chance to reconnect.
      const other = await open();
      await other.putNode(rec('n2', 2), 'absent');
      assert.equal(await other.deleteNode('n1'), true);

      const resumed = Date.now();
      await log.waitFor((e) => e.length === 3, 8000);
      assert.deepEqual(summary(log.events), ['put n1', 'put n2', 'delete n1']);
      const recovered = await until('the watcher’s health recovers', 3000, () => watcher.health().ok);
      assert.ok(watcher.health().since >= restartedAt);
      assert.equal((await writer.getNode('n2'))?.node.name, 'n2');
      t.diagnostic(
        `refused call failed in ${refused} ms; health down after ${noticed} ms; events resumed ${Date.now() - resumed} ms after the writes; health ok ${recovered} ms later`,
      );
    } finally {
      await log.stop();
    }
  });

  test('etcd paused (SIGSTOP): calls time out with ERR_STORE, the silent watch is replaced after resume', async (t) => {
    const [watcher, writer] = [await open(), await open()];
    const since = await watcher.listNodes();
    const log = new EventLog(watcher, since);
    try {
      server.pause();
      let timedOut: number;
      try {
        timedOut = await failsWithin(
          FAST.requestTimeoutMs + 1000,
          () => writer.listNodes(),
          /no answer within the request timeout/,
        );
        await until(
          'the watcher’s health goes down',
          FAST.healthIntervalMs + FAST.requestTimeoutMs + 1500,
          () => !watcher.health().ok,
        );
      } finally {
        server.resume();
      }
      await until('the watcher’s health recovers', 4000, () => watcher.health().ok);
      await writer.putNode(rec('n3', 3), 'absent');
      await log.waitFor((e) => e.some((x) => x.node.name === 'n3'), 5000);
      assert.deepEqual(summary(log.events), ['put n3']);
      t.diagnostic(`a call to the paused etcd failed after ${timedOut} ms`);
    } finally {
      await log.stop();
    }
  });

  test('events made before the watch reconnected arrive with their own revisions (resume, no relist)', async () => {
    const [watcher, writer] = [await open(), await open()];
    const since = await watcher.listNodes();
    // Pulled by hand: the watch cannot reconnect before the writes below, because nobody asks it to.
    const watch = watcher.watchNodes({ signal: AbortSignal.timeout(30_000), since });
    try {
      await writer.putNode(rec('n7', 7), 'absent');
      const first = await watch.next();
      assert.equal(first.done === false && first.value.node.name, 'n7');

      await server.stop();
      await server.restart();
      const other = await open();
      const put = await other.putNode(rec('n8', 8), 'absent');
      assert.ok(put.ok);
      await other.deleteNode('n7');

      const got: string[] = [];
      for (let i = 0; i < 2; i++) {
        const r = await watch.next();
        if (!r.done) got.push(`${r.value.type} ${r.value.node.name}@${r.value.revision}`);
      }
      const deleted = String(Number(put.version) + 1);
      assert.deepEqual(got, [`put n8@${put.version}`, `delete n7@${deleted}`]);
    } finally {
      await watch.return();
    }
  });

  test('history compacted while the watch was away: it lists afresh and emits the difference', async () => {
    const [watcher, writer] = [await open(), await open()];
    // Pull events by hand: while the consumer does not ask, the watch stays suspended on its stream.
    const since = await watcher.listNodes();
    const watch = watcher.watchNodes({ signal: AbortSignal.timeout(30_000), since });
    try {
      await writer.putNode(rec('n5', 5), 'absent');
      const first = await watch.next(); // delivered from the stream, which stays open, suspended
      assert.equal(first.done === false && first.value.node.name, 'n5');

      await server.stop();
      await server.restart();
      const other = await open();
      await other.putNode(rec('n6', 6), 'absent');
      await other.deleteNode('n5');
      const now = await other.listNodes();
      await server.call('/v3/kv/compaction', { revision: now.revision });

      const got: string[] = [];
      for (let i = 0; i < 2; i++) {
        const r = await watch.next();
        assert.equal(r.done, false);
        if (!r.done) got.push(`${r.value.type} ${r.value.node.name}@${r.value.revision}`);
      }
      assert.deepEqual(got, [`put n6@${now.revision}`, `delete n5@${now.revision}`]);
    } finally {
      await watch.return();
    }
  });
});
