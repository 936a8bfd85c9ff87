/**
 * The race of issue 27 on IP pools as IPPool objects (src/cluster/kube-pools.ts), against a real
 * kube-apiserver and etcd (bed/kube-api.ts), the CRD installed from deploy/: two nodes (a
 * PoolAllocator over its own store and watch each, 8 ADDs in flight on each) allocating
 * PODWIRE_POOL_RACE addresses (default 200; 1000 for the figure: `npm run bench:pool-race`)
 * concurrently from ONE pool object of exactly that many addresses: every allocation succeeds, no
 * address twice, every claim recorded in the object with its owner, none lost; the conflicts (409s,
 * each read again and retried) counted and reported; then all released concurrently, leaving the
 * object empty.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IpPool } from '../../src/cluster/ip-pool.js';
import { IPPOOLS_PATH } from '../../src/cluster/kube-pools.js';
import { MemoryStore } from '../../src/ipam/memory-store.js';
import { PoolAllocator } from '../../src/ipam/pool-allocator.js';
import { adminClient } from './kube-harness.js';
import { closeNode, deleteAllPools, kubeApiForFile, openNode } from './pool-harness.js';

const kubeApi = kubeApiForFile();

const RACE = Number(process.env.PODWIRE_POOL_RACE ?? 200);

describe(`IPPool race: ${RACE} allocations from two nodes on one pool object`, { timeout: 900_000 }, () => {
  it('no address twice, every claim recorded with its owner, none lost; conflicts retried', async (t) => {
    assert.ok(
      Number.isInteger(RACE) && RACE % 2 === 0 && RACE >= 10 && RACE <= 1020,
      'PODWIRE_POOL_RACE: even, 10 to 1020',
    );
    const s = await kubeApi();
    const admin = adminClient(s);
    const nodes = [openNode(s), openNode(s)];
    try {
      // exactly RACE addresses: 10.77.0.1 up to 10.77.0.0 + RACE, in a /22 whose gateway is outside them
      const last = RACE;
      const pool: IpPool = {
        name: 'race',
        ranges: [`10.77.0.1-10.77.${last >> 8}.${last & 255}`],
        subnet: { gateway: '10.77.3.254', prefixLength: 22 },
        vlan: 0,
      };
      assert.equal(await nodes[0]?.store.createPool(pool), true);
      const allocators = await Promise.all(
        nodes.map((n, i) =>
          PoolAllocator.open({ pools: n.store, local: new MemoryStore(), localRanges: [], node: `n${i}` }),
        ),
      );
      const started = Date.now();
      // each node: RACE/2 ADDs, 8 at a time (the agent's CNI calls in parallel)
      const perNode = async (a: PoolAllocator, n: number): Promise<Array<{ ip: string; id: string }>> => {
        const ids = Array.from({ length: RACE / 2 }, (_, i) => `n${n}-pod${i}`);
        const out: Array<{ ip: string; id: string }> = [];
        const worker = async (): Promise<void> => {
          for (let id = ids.shift(); id !== undefined; id = ids.shift()) {
            const got = await a.allocate(
              { containerId: id, ifname: 'eth0' },
              { pool: 'race', poolSource: 'test' },
            );
            out.push({ ip: got.ip, id });
          }
        };
        await Promise.all(Array.from({ length: 8 }, worker));
        return out;
      };
      const results = await Promise.all(allocators.map((a, n) => perNode(a, n)));
      const allocMs = Date.now() - started;
      const all = results.flat();
      assert.equal(all.length, RACE, 'every allocation succeeded');
      const ips = new Set(all.map((r) => r.ip));
      assert.equal(ips.size, RACE, `no address twice (${RACE - ips.size} duplicates)`);
      const object = (await admin.getJson(`${IPPOOLS_PATH}/race`)) as {
        status: { allocations: Record<string, { node: string; containerID: string; ifname: string }> };
      };
      const recorded = object.status.allocations;
      assert.equal(Object.keys(recorded).length, RACE, 'every claim recorded in the pool object, none lost');
      for (const [n, list] of results.entries())
        for (const { ip, id } of list)
          assert.deepEqual(
            {
              node: recorded[ip]?.node,
              containerID: recorded[ip]?.containerID,
              ifname: recorded[ip]?.ifname,
            },
            { node: `n${n}`, containerID: id, ifname: 'eth0' },
            `the owner of ${ip}`,
          );
      const conflicts = nodes.map((n) => n.store.stats.conflicts);
      t.diagnostic(
        `${RACE} allocations in ${allocMs} ms; conflicts retried: ${conflicts.join(' + ')}; writes ${nodes.map((n) => n.store.stats.writes).join(' + ')}; cache waits timed out ${nodes.map((n) => n.store.stats.cacheLag).join(' + ')}`,
      );
      assert.ok(
        (conflicts[0] ?? 0) + (conflicts[1] ?? 0) > 0,
        'the two nodes did race on the object (no conflict at all: the race was not exercised)',
      );

      // and back: every address released by its node, concurrently
      const releasing = Date.now();
      await Promise.all(
        results.map(async (list, n) => {
          const a = allocators[n] as PoolAllocator;
          const queue = [...list];
          const worker = async (): Promise<void> => {
            for (let r = queue.shift(); r !== undefined; r = queue.shift()) {
              const gone = await a.release({ containerId: r.id, ifname: 'eth0' });
              assert.deepEqual(
                gone.map((g) => g.ip),
                [r.ip],
              );
            }
          };
          await Promise.all(Array.from({ length: 8 }, worker));
        }),
      );
      const after = (await admin.getJson(`${IPPOOLS_PATH}/race`)) as { status?: { allocations?: object } };
      assert.deepEqual(Object.keys(after.status?.allocations ?? {}), [], 'every release landed');
      t.diagnostic(
        `released in ${Date.now() - releasing} ms; conflicts in all: ${nodes.map((n) => n.store.stats.conflicts).join(' + ')}`,
      );
    } finally {
      for (const n of nodes) await closeNode(n);
      admin.close();
      await deleteAllPools(s);
    }
  });
});
