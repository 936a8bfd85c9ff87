/**
 * The compliance suite of the IpamStore seam (src/ipam/store.ts): every implementation, real or
 * fake, runs it. A harness provides stores over one shared backing, so "reopen" means a second
 * instance over the same data (a directory, a cluster).
 */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PodwireError } from '../../src/base/errors.js';
import type { AllocationRecord, IpamStore, StoredClaim } from '../../src/ipam/store.js';

export interface StoreHarness {
  /** A new store instance over the harness's backing. */
  open(): Promise<IpamStore>;
  /** Removes whatever the harness created. Called once, whatever happened. */
  cleanup(): Promise<void>;
}

const RANGE = '10.244.1.0/24';
const RANGE6 = 'fd00:10:244:1::/64';

function rec(containerId: string, ifname = 'eth0'): AllocationRecord {
  return { containerId, ifname, createdAt: '2024-05-01T12:00:00.000Z' };
}

function sorted(claims: StoredClaim[]): StoredClaim[] {
  return [...claims].sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0));
}

function isCode(code: string): (err: unknown) => boolean {
  return (err) => err instanceof PodwireError && err.code === code;
}

export function storeCompliance(name: string, makeHarness: () => Promise<StoreHarness>): void {
  /** Runs `fn` with a fresh harness; closes every store it opened and cleans up, pass or fail. */
  async function withStores(fn: (open: () => Promise<IpamStore>) => Promise<void>): Promise<void> {
    const harness = await makeHarness();
    const opened: IpamStore[] = [];
    try {
      await fn(async () => {
        const store = await harness.open();
        opened.push(store);
        return store;
      });
    } finally {
      try {
        for (const store of opened) await store.close();
      } finally {
        await harness.cleanup();
      }
    }
  }

  describe(`IpamStore compliance: ${name}`, () => {
    test('a claimed address cannot be claimed again, by anyone', () =>
      withStores(async (open) => {
        const store = await open();
        assert.equal(await store.claim(RANGE, '10.244.1.5', rec('a')), true);
        assert.equal(await store.claim(RANGE, '10.244.1.5', rec('b')), false);
        assert.equal(await store.claim(RANGE, '10.244.1.5', rec('a')), false);
        assert.deepEqual(await store.list(RANGE), {
          claims: [{ ip: '10.244.1.5', rec: rec('a') }],
          unreadable: [],
        });
      }));

    test('ranges are independent, whatever characters their ids hold', () =>
      withStores(async (open) => {
        const store = await open();
        const ids = [RANGE, '10.244.1.0_24', 'a:b', 'a-b', 'a_b', 'a/b', 'a%2Fb', '.', '..', 'net ✓'];
        for (const id of ids) assert.equal(await store.claim(id, '10.0.0.2', rec(`c-${id}`)), true, id);
        for (const id of ids)
          assert.deepEqual((await store.list(id)).claims, [{ ip: '10.0.0.2', rec: rec(`c-${id}`) }], id);
        assert.deepEqual((await store.list('never-used')).claims, []);
      }));

    test('release removes only the owner’s claim, once', () =>
      withStores(async (open) => {
        const store = await open();
        assert.equal(await store.claim(RANGE, '10.244.1.7', rec('a', 'eth0')), true);
        assert.equal(await store.release(RANGE, '10.244.1.7', { containerId: 'b', ifname: 'eth0' }), false);
        assert.equal(await store.release(RANGE, '10.244.1.7', { containerId: 'a', ifname: 'net1' }), false);
        assert.equal((await store.list(RANGE)).claims.length, 1);
        assert.equal(await store.release(RANGE, '10.244.1.7', { containerId: 'a', ifname: 'eth0' }), true);
        assert.equal(await store.release(RANGE, '10.244.1.7', { containerId: 'a', ifname: 'eth0' }), false);
        assert.equal(
          await store.release('other-range', '10.244.1.7', { containerId: 'a', ifname: 'eth0' }),
          false,
        );
        assert.deepEqual((await store.list(RANGE)).claims, []);
        assert.equal(
          await store.claim(RANGE, '10.244.1.7', rec('b')),
          true,
          'released address is free again',
        );
      }));

    test('list returns every claim with its record', () =>
      withStores(async (open) => {
        const store = await open();
        const want: StoredClaim[] = [];
        for (let i = 2; i < 12; i++) {
          const ip = `10.244.1.${i}`;
          assert.equal(await store.claim(RANGE, ip, rec(`c${i}`)), true);
          want.push({ ip, rec: rec(`c${i}`) });
        }
        assert.deepEqual(sorted((await store.list(RANGE)).claims), sorted(want));
      }));

    test('addresses are keyed and listed in canonical form', () =>
      withStores(async (open) => {
        const store = await open();
        assert.equal(await store.claim(RANGE6, 'FD00:10:244:1:0:0:0:A', rec('a')), true);
        assert.equal(await store.claim(RANGE6, 'fd00:10:244:1::a', rec('b')), false);
        assert.deepEqual((await store.list(RANGE6)).claims, [{ ip: 'fd00:10:244:1::a', rec: rec('a') }]);
        assert.equal(
          await store.release(RANGE6, 'fd00:10:244:1:0::a', { containerId: 'a', ifname: 'eth0' }),
          true,
        );
      }));

    test('bad arguments are refused with ERR_INVALID_CONFIG', () =>
      withStores(async (open) => {
        const store = await open();
        const invalid = isCode('ERR_INVALID_CONFIG');
        await assert.rejects(store.claim(RANGE, 'not-an-ip', rec('a')), invalid);
        await assert.rejects(store.claim(RANGE, '10.244.1.256', rec('a')), invalid);
        await assert.rejects(store.claim(RANGE, '../../etc/passwd', rec('a')), invalid);
        await assert.rejects(store.claim('', '10.244.1.2', rec('a')), invalid);
        await assert.rejects(store.claim(RANGE, '10.244.1.2', rec('')), invalid);
        await assert.rejects(store.claim(RANGE, '10.244.1.2', { ...rec('a'), ifname: '' }), invalid);
        await assert.rejects(store.release(RANGE, '10.244.1', { containerId: 'a', ifname: 'eth0' }), invalid);
        await assert.rejects(store.list(''), invalid);
        assert.deepEqual((await store.list(RANGE)).claims, []);
      }));

    test('of 20 concurrent claims of one address exactly one wins', () =>
      withStores(async (open) => {
        const [s1, s2] = [await open(), await open()];
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            (i % 2 === 0 ? s1 : s2).claim(RANGE, '10.244.1.9', rec(`c${i}`)),
          ),
        );
        assert.equal(results.filter(Boolean).length, 1);
        const winner = results.indexOf(true);
        assert.deepEqual((await s1.list(RANGE)).claims, [{ ip: '10.244.1.9', rec: rec(`c${winner}`) }]);
      }));

    test('concurrent claims of different addresses all succeed', () =>
      withStores(async (open) => {
        const store = await open();
        const ips = Array.from({ length: 20 }, (_, i) => `10.244.1.${i + 2}`);
        const results = await Promise.all(ips.map((ip, i) => store.claim(RANGE, ip, rec(`c${i}`))));
        assert.deepEqual(
          results,
          ips.map(() => true),
        );
        assert.equal((await store.list(RANGE)).claims.length, 20);
      }));

    test('a reopened store sees the claims and releases of another instance', () =>
      withStores(async (open) => {
        const first = await open();
        assert.equal(await first.claim(RANGE, '10.244.1.2', rec('a')), true);
        assert.equal(await first.claim(RANGE6, 'fd00:10:244:1::2', rec('a')), true);
        assert.equal(await first.claim(RANGE, '10.244.1.3', rec('b')), true);
        await first.close();
        const second = await open();
        assert.deepEqual(sorted((await second.list(RANGE)).claims), [
          { ip: '10.244.1.2', rec: rec('a') },
          { ip: '10.244.1.3', rec: rec('b') },
        ]);
        assert.deepEqual((await second.list(RANGE6)).claims, [{ ip: 'fd00:10:244:1::2', rec: rec('a') }]);
        assert.equal(await second.claim(RANGE, '10.244.1.2', rec('c')), false);
        assert.equal(await second.release(RANGE, '10.244.1.3', { containerId: 'b', ifname: 'eth0' }), true);
        const third = await open();
        assert.deepEqual((await third.list(RANGE)).claims, [{ ip: '10.244.1.2', rec: rec('a') }]);
      }));

    test('a record keeps its network name; adoptNetwork names a legacy claim once, for its owner only', () =>
      withStores(async (open) => {
        const store = await open();
        const named = { ...rec('a'), network: 'podwire-sec' };
        assert.equal(await store.claim(RANGE, '10.244.1.2', named), true);
        assert.equal(await store.claim(RANGE, '10.244.1.3', rec('b')), true);
        assert.equal(
          await store.adoptNetwork(RANGE, '10.244.1.2', { containerId: 'a', ifname: 'eth0' }, 'other'),
          false,
        );
        assert.equal(
          await store.adoptNetwork(RANGE, '10.244.1.3', { containerId: 'a', ifname: 'eth0' }, 'x'),
          false,
        );
        assert.equal(
          await store.adoptNetwork(RANGE, '10.244.1.9', { containerId: 'b', ifname: 'eth0' }, 'x'),
          false,
        );
        const b = { containerId: 'b', ifname: 'eth0' };
        assert.equal(await store.adoptNetwork(RANGE, '10.244.1.3', b, 'podwire'), true);
        assert.equal(await store.adoptNetwork(RANGE, '10.244.1.3', b, 'again'), false);
        const reopened = await open();
        assert.deepEqual(sorted((await reopened.list(RANGE)).claims), [
          { ip: '10.244.1.2', rec: named },
          { ip: '10.244.1.3', rec: { ...rec('b'), network: 'podwire' } },
        ]);
        assert.equal(await reopened.release(RANGE, '10.244.1.3', b), true);
        assert.equal(await reopened.claim(RANGE, '10.244.1.3', rec('c')), true, 'the address is free again');
        await assert.rejects(
          store.claim(RANGE, '10.244.1.4', { ...rec('d'), network: '' }),
          isCode('ERR_INVALID_CONFIG'),
        );
      }));

    test('close waits for calls in flight, is idempotent, and later calls fail with ERR_STORE', () =>
      withStores(async (open) => {
        const store = await open();
        const inFlight = store.claim(RANGE, '10.244.1.4', rec('a'));
        await store.close();
        assert.equal(await inFlight, true);
        await store.close();
        const closed = isCode('ERR_STORE');
        await assert.rejects(store.claim(RANGE, '10.244.1.5', rec('a')), closed);
        await assert.rejects(
          store.release(RANGE, '10.244.1.4', { containerId: 'a', ifname: 'eth0' }),
          closed,
        );
        await assert.rejects(store.list(RANGE), closed);
        const reopened = await open();
        assert.deepEqual((await reopened.list(RANGE)).claims, [{ ip: '10.244.1.4', rec: rec('a') }]);
      }));
  });
}
