/**
 * Issue 15, finding 3: a pool address could be a node's own underlay IP (the pool excluded only its
 * network, gateway and broadcast), and `IP=<node IP>` was accepted; both datapaths' guards then let
 * that pod speak as the node. Depends on `nodeAddresses` in src/ipam/pool-allocator.ts (claimAny
 * skips them, claimFixed refuses them) fed by src/cluster/node-addresses.ts.
 *
 * The node records come from a real cluster store (the static file store); the pool claims go to the
 * in-memory PoolStore, the fake that passes the same compliance suite as the etcd one.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { PodwireError } from '../../../src/base/errors.js';
import { FileStore } from '../../../src/cluster/file-store.js';
import { MemoryPoolStore } from '../../../src/cluster/memory-pool-store.js';
import { nodeAddressesOf } from '../../../src/cluster/node-addresses.js';
import { MemoryStore } from '../../../src/ipam/memory-store.js';
import { PoolAllocator } from '../../../src/ipam/pool-allocator.js';

const NODES = [
  { name: 'node-a', underlayIP: '192.0.2.11', podCIDRs: ['10.244.1.0/24'] },
  { name: 'node-b', underlayIP: '192.0.2.12', podCIDRs: ['10.244.2.0/24'] },
];

async function withAllocator(fn: (a: PoolAllocator) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'pwt-nodes-'));
  const path = join(dir, 'cluster.yaml');
  await writeFile(path, stringify({ nodes: NODES }));
  const store = await FileStore.open({ path });
  try {
    const pools = new MemoryPoolStore();
    // Four addresses, two of them the nodes'.
    await pools.createPool({
      name: 'under',
      ranges: ['192.0.2.10-192.0.2.13'],
      subnet: { gateway: '192.0.2.1', prefixLength: 24 },
      vlan: 0,
    });
    const alloc = await PoolAllocator.open({
      pools,
      local: new MemoryStore(),
      localRanges: [],
      node: 'node-a',
      nodeAddresses: () => nodeAddressesOf(store),
    });
    await fn(alloc);
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

test('finding 3: a pool never hands out a node address', async () => {
  await withAllocator(async (alloc) => {
    const got: string[] = [];
    for (let i = 0; i < 2; i++) {
      const a = await alloc.allocate(
        { containerId: `c${i}`, ifname: 'eth0' },
        { pool: 'under', poolSource: 'test' },
      );
      got.push(a.ip);
    }
    assert.deepEqual(got.sort(), ['192.0.2.10', '192.0.2.13']);
    await assert.rejects(
      alloc.allocate({ containerId: 'c9', ifname: 'eth0' }, { pool: 'under', poolSource: 'test' }),
      (err: unknown) => err instanceof PodwireError && err.code === 'ERR_IPAM_EXHAUSTED',
      "the nodes' addresses do not count as free",
    );
  });
});

test('finding 3: IP=<node address> gets a clear error naming the node', async () => {
  await withAllocator(async (alloc) => {
    await assert.rejects(
      alloc.allocate(
        { containerId: 'fixed', ifname: 'eth0' },
        { pool: 'under', poolSource: 'test', ip: { value: '192.0.2.12', source: 'CNI_ARGS IP' } },
      ),
      (err: unknown) =>
        err instanceof PodwireError &&
        err.code === 'ERR_INVALID_CONFIG' &&
        /CNI_ARGS IP: 192\.0\.2\.12 is the address of node node-b/.test(err.message),
    );
  });
});
