/**
 * The compliance suite of the pool seam (src/cluster/pool-store.ts), run against every
 * implementation: EtcdPoolStore on a real etcd and the in-memory fake MemoryPoolStore. A harness opens
 * clients over one shared backing ("open" twice = two nodes of one cluster).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PodwireError } from '../../src/base/errors.js';
import type { IpPool } from '../../src/cluster/ip-pool.js';
import type { PoolClaim, PoolClaimOwner, PoolStore } from '../../src/cluster/pool-store.js';
import { MemoryStore } from '../../src/ipam/memory-store.js';
import { PoolAllocator } from '../../src/ipam/pool-allocator.js';

export interface PoolStoreHarness {
  /** A new client over the harness's backing. */
  open(): Promise<PoolStore>;
  /** Closes what the harness opened and removes its data. Called once, pass or fail. */
  cleanup(): Promise<void>;
}

/** 24 addresses: .100-.123 of a /24 whose gateway is .254. */
const BLUE: IpPool = {
  name: 'blue',
  ranges: ['172.30.0.100-172.30.0.123'],
  subnet: { gateway: '172.30.0.254', prefixLength: 24 },
  vlan: 0,
};

function owner(containerId: string, node = 'node-a'): PoolClaimOwner {
  return {
    node,
    containerId,
    ifname: 'eth0',
    pod: `default/${containerId}`,
    createdAt: '2026-01-01T00:00:00.000Z',
  };
}

function isCode(code: string, re?: RegExp): (err: unknown) => boolean {
  return (err) => {
    if (err instanceof PodwireError && err.code === code && (re === undefined || re.test(err.message)))
      return true;
    throw new Error(
      `expected ${code} ${re ?? ''}, got ${err instanceof PodwireError ? err.code : ''} ${err}`,
    );
  };
}

const byIp = (a: PoolClaim, b: PoolClaim) => a.ip.localeCompare(b.ip);

/**
 * The pools the claim tests use, created first: a claim is made in a pool that exists (the
 * Kubernetes store keeps the claims inside the pool object, so there is nothing to claim in without it).
 */
const SIX: IpPool = {
  name: 'six',
  ranges: ['fd00:30::/120'],
  subnet: { gateway: 'fd00:30::1', prefixLength: 64 },
  vlan: 0,
};
const RED: IpPool = { ...BLUE, name: 'red' };

export function poolStoreCompliance(name: string, makeHarness: () => Promise<PoolStoreHarness>): void {
  async function withStores(fn: (open: () => Promise<PoolStore>) => Promise<void>): Promise<void> {
    const harness = await makeHarness();
    try {
      await fn(() => harness.open());
    } finally {
      await harness.cleanup();
    }
  }

  describe(`PoolStore compliance: ${name}`, () => {
    test('a pool is created once, read back canonical by every client, listed by name', () =>
      withStores(async (open) => {
        const a = await open();
        const b = await open();
        const green = {
          name: 'green',
          ranges: ['FD00:30::10-FD00:30::1F'],
          subnet: { gateway: 'FD00:30::1', prefixLength: 64 },
        } as IpPool;
        assert.equal(await a.createPool(green), true);
        assert.equal(await a.createPool(BLUE), true);
        assert.equal(await b.createPool({ ...BLUE, ranges: ['172.30.0.10/32'] }), false, 'the name is taken');
        assert.deepEqual(await b.getPool('blue'), BLUE, 'the first one stays');
        assert.deepEqual(await b.getPool('green'), {
          name: 'green',
          ranges: ['fd00:30::10-fd00:30::1f'],
          subnet: { gateway: 'fd00:30::1', prefixLength: 64 },
          vlan: 0,
        });
        assert.equal(await b.getPool('red'), undefined);
        assert.deepEqual(
          (await b.listPools()).map((p) => p.name),
          ['blue', 'green'],
        );
      }));

    test('an invalid pool is refused with ERR_INVALID_CONFIG naming the key, and nothing is stored', () =>
      withStores(async (open) => {
        const s = await open();
        await assert.rejects(
          async () => s.createPool({ ...BLUE, ranges: ['10.0.0.1-10.0.0.5'] }),
          isCode('ERR_INVALID_CONFIG', /ranges\[0\]/),
        );
        await assert.rejects(
          async () => s.createPool({ ...BLUE, name: 'Blue' }),
          isCode('ERR_INVALID_CONFIG', /name/),
        );
        assert.deepEqual(await s.listPools(), []);
      }));

    test('an address is claimed once: every other claim, in any spelling, by anyone, gets undefined', () =>
      withStores(async (open) => {
        const a = await open();
        const b = await open();
        await a.createPool(BLUE);
        const claim = await a.claim('blue', '172.30.0.105', owner('c1'));
        assert.ok(claim);
        assert.equal(claim.ip, '172.30.0.105');
        assert.deepEqual(claim.owner, owner('c1'));
        assert.equal(typeof claim.version, 'string');
        assert.equal(await b.claim('blue', '172.30.0.105', owner('c2', 'node-b')), undefined);
        assert.equal(await a.claim('blue', '172.30.0.105', owner('c1')), undefined, 'not even by its holder');
        assert.deepEqual(await b.claimOf('blue', '172.30.0.105'), claim);
        assert.deepEqual(await b.claims('blue'), [claim]);
        assert.equal(await b.claimOf('blue', '172.30.0.106'), undefined);
        assert.deepEqual(await b.claims('never-made'), []);
      }));

    test('addresses are canonical: IPv6 in any spelling names one claim', () =>
      withStores(async (open) => {
        const s = await open();
        await s.createPool(SIX);
        const claim = await s.claim('six', 'FD00:30:0::00A', owner('c1'));
        assert.equal(claim?.ip, 'fd00:30::a');
        assert.equal(await s.claim('six', 'fd00:30::a', owner('c2')), undefined);
        assert.deepEqual(await s.claimOf('six', 'fd00:0030::000a'), claim);
        assert.deepEqual(
          (await s.claims('six')).map((c) => c.ip),
          ['fd00:30::a'],
        );
        await assert.rejects(
          async () => s.claim('six', 'not-an-ip', owner('c3')),
          isCode('ERR_INVALID_CONFIG'),
        );
        await assert.rejects(async () => s.claimOf('six', '300.1.1.1'), isCode('ERR_INVALID_CONFIG'));
      }));

    test('pools are independent: one address held in two pools', () =>
      withStores(async (open) => {
        const s = await open();
        await s.createPool(BLUE);
        await s.createPool(RED);
        assert.ok(await s.claim('blue', '172.30.0.100', owner('c1')));
        assert.ok(await s.claim('red', '172.30.0.100', owner('c2')));
        assert.equal((await s.claims('blue'))[0]?.owner.containerId, 'c1');
        assert.equal((await s.claims('red'))[0]?.owner.containerId, 'c2');
      }));

    test('release removes the claim given, once; a stale claim never removes a newer one', () =>
      withStores(async (open) => {
        const a = await open();
        const b = await open();
        await a.createPool(BLUE);
        const first = await a.claim('blue', '172.30.0.110', owner('c1'));
        assert.ok(first);
        assert.equal(await b.release('blue', first), true);
        assert.equal(await a.release('blue', first), false, 'released already');
        assert.equal(await a.claimOf('blue', '172.30.0.110'), undefined);
        const second = await b.claim('blue', '172.30.0.110', owner('c2', 'node-b'));
        assert.ok(second);
        assert.notEqual(second.version, first.version);
        assert.equal(await a.release('blue', first), false, 'the old claim is not the one held now');
        assert.deepEqual(await a.claimOf('blue', '172.30.0.110'), second);
        const read = await a.claimOf('blue', '172.30.0.110');
        assert.ok(read);
        assert.equal(await a.release('blue', read), true, 'a claim read back releases');
        assert.deepEqual(await b.claims('blue'), []);
        assert.equal(await a.release('other', second), false, 'a claim of another pool');
      }));

    test('20 clients racing for one address: exactly one holds it, and claimOf names that one', () =>
      withStores(async (open) => {
        const clients = await Promise.all(Array.from({ length: 20 }, () => open()));
        await clients[0]?.createPool(BLUE);
        const got = await Promise.all(
          clients.map((s, i) => s.claim('blue', '172.30.0.111', owner(`c${i}`, `node-${i}`))),
        );
        const winners = got.filter((c) => c !== undefined);
        assert.equal(winners.length, 1, `winners: ${JSON.stringify(winners)}`);
        assert.deepEqual(await clients[0]?.claimOf('blue', '172.30.0.111'), winners[0]);
      }));

    test('3 nodes x 10 pods racing on 24 addresses: 24 distinct holders, 6 told the pool is exhausted', () =>
      withStores(async (open) => {
        const admin = await open();
        await admin.createPool(BLUE);
        const nodes = await Promise.all(
          ['n1', 'n2', 'n3'].map(async (node) =>
            PoolAllocator.open({ pools: await open(), local: new MemoryStore(), localRanges: [], node }),
          ),
        );
        const outcomes = await Promise.allSettled(
          nodes.flatMap((alloc, n) =>
            Array.from({ length: 10 }, (_, i) =>
              alloc.allocate(
                { containerId: `n${n}-p${i}`, ifname: 'eth0' },
                { pool: 'blue', poolSource: 'test' },
              ),
            ),
          ),
        );
        const ok = outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value.ip);
        const failed = outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason);
        assert.equal(ok.length, 24);
        assert.equal(new Set(ok).size, 24, 'no address twice');
        assert.equal(failed.length, 6);
        for (const err of failed) isCode('ERR_IPAM_EXHAUSTED', /blue exhausted/)(err);
        const held = (await admin.claims('blue')).sort(byIp);
        assert.deepEqual(
          held.map((c) => c.ip),
          [...ok].sort(),
        );
        assert.equal(new Set(held.map((c) => `${c.owner.node} ${c.owner.containerId}`)).size, 24);
      }));

    test('a pool with held addresses is not deleted (ERR_STORE names a holder); an empty one is, once', () =>
      withStores(async (open) => {
        const s = await open();
        await s.createPool(BLUE);
        const claim = await s.claim('blue', '172.30.0.120', owner('c9', 'node-z'));
        assert.ok(claim);
        await assert.rejects(
          async () => s.deletePool('blue'),
          isCode('ERR_STORE', /1 address\(es\) still held: 172\.30\.0\.120 \(node-z default\/c9\)/),
        );
        assert.deepEqual(await s.getPool('blue'), BLUE);
        assert.equal(await s.release('blue', claim), true);
        assert.equal(await s.deletePool('blue'), true);
        assert.equal(await s.getPool('blue'), undefined);
        assert.deepEqual(await s.listPools(), []);
        assert.equal(await s.deletePool('blue'), false, 'gone already');
        assert.equal(await s.createPool(BLUE), true, 'the name is free again');
      }));

    test('an aborted signal: the call rejects with ERR_STORE and changes nothing', () =>
      withStores(async (open) => {
        const s = await open();
        const signal = AbortSignal.abort(new Error('test abort'));
        await assert.rejects(async () => s.createPool(BLUE, { signal }), isCode('ERR_STORE'));
        await assert.rejects(
          async () => s.claim('blue', '172.30.0.101', owner('c1'), { signal }),
          isCode('ERR_STORE'),
        );
        await assert.rejects(async () => s.listPools({ signal }), isCode('ERR_STORE'));
        assert.deepEqual(await s.listPools(), []);
        assert.deepEqual(await s.claims('blue'), []);
      }));
  });
}
