/**
 * A pool allocation (the IPAM step of a pool pod's ADD) under injected faults: each call it makes to
 * the cluster's pool store and to the node's record (an IpamStore) fails in turn, before it reaches
 * the store or after it took effect (a lost answer). After each failure nothing is held (no cluster
 * claim, no local record, nothing the allocator remembers) and the next allocation of the same
 * attachment, with or without a fixed address, succeeds. Runs on the in-memory fakes of both seams.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PodwireError } from '../../src/base/errors.js';
import { MemoryPoolStore, memoryPoolBacking } from '../../src/cluster/memory-pool-store.js';
import { type MemoryBacking, MemoryStore } from '../../src/ipam/memory-store.js';
import { PoolAllocator, type PoolRequest } from '../../src/ipam/pool-allocator.js';
import { type Fault, FaultPlan, INJECTED } from '../agent/fault/fault-plan.js';
import { FaultyPoolStore } from '../cluster/faulty-pool-store.js';
import { FaultyIpamStore } from './faulty-store.js';

const BLUE = {
  name: 'blue',
  ranges: ['172.30.0.100-172.30.0.103'],
  subnet: { gateway: '172.30.0.254', prefixLength: 24 },
  vlan: 0,
};
const ATT = { containerId: 'c-fault', ifname: 'eth0' };

/** Every store call `allocate` makes, in order: any address (claims listed first) or a fixed one. */
const ANY: Array<Omit<Fault, 'id'>> = [
  { op: 'pools.getPool', nth: 1, when: 'before' },
  { op: 'pools.claims', nth: 1, when: 'before' },
  { op: 'pools.claim', nth: 1, when: 'before' },
  { op: 'pools.claim', nth: 1, when: 'after' },
  { op: 'store.claim', nth: 1, when: 'before' },
  { op: 'store.claim', nth: 1, when: 'after' },
];
const FIXED = ANY.filter((f) => f.op !== 'pools.claims');

async function setup() {
  const cluster = memoryPoolBacking();
  const local: MemoryBacking = new Map();
  const plan = new FaultPlan();
  const admin = new MemoryPoolStore(cluster);
  await admin.createPool(BLUE);
  const alloc = await PoolAllocator.open({
    pools: new FaultyPoolStore(new MemoryPoolStore(cluster), plan),
    local: new FaultyIpamStore(new MemoryStore(local), plan),
    localRanges: [],
    node: 'node-a',
  });
  return { cluster, local, plan, admin, alloc };
}

for (const [kind, faults, req] of [
  ['any address', ANY, { pool: 'blue', poolSource: 'test' }],
  [
    'fixed address',
    FIXED,
    { pool: 'blue', poolSource: 'test', ip: { value: '172.30.0.102', source: 'test IP' } },
  ],
] as Array<[string, Array<Omit<Fault, 'id'>>, PoolRequest]>) {
  describe(`pool allocation, ${kind}, under injected faults`, () => {
    for (const f of faults) {
      test(`${f.op} fails ${f.when}: nothing held, the next allocation works`, async () => {
        const { cluster, local, plan, admin, alloc } = await setup();
        plan.set({ id: 'x', ...f });
        await assert.rejects(
          alloc.allocate(ATT, req),
          (err) => err instanceof PodwireError && err.message.startsWith(`${INJECTED}: ${f.op}`),
        );
        plan.set(undefined);
        assert.deepEqual(await admin.claims('blue'), [], 'no cluster claim');
        assert.deepEqual(
          [...local.values()].flatMap((r) => [...r.keys()]),
          [],
          'no local record',
        );
        assert.deepEqual(alloc.lookup(ATT), []);
        const got = await alloc.allocate(ATT, req);
        if (req.ip) assert.equal(got.ip, req.ip.value);
        assert.deepEqual(
          (await admin.claims('blue')).map((c) => `${c.ip} ${c.owner.containerId}`),
          [`${got.ip} c-fault`],
        );
        assert.deepEqual(await alloc.release(ATT), [got]);
        assert.deepEqual(await admin.claims('blue'), []);
        assert.equal(cluster.claims.size, 0);
        assert.deepEqual(
          [...local.values()].flatMap((r) => [...r.keys()]),
          [],
        );
      });
    }
  });
}
