/**
 * `Rtnetlink.batch` (several requests per sendmsg, one ack per datagram) against the real kernel in a
 * throwaway namespace: every request is applied, over many datagrams, on the synchronous socket and
 * on a worker thread; a refused request in the middle is reported with its index and its errno and
 * the others are still applied. Needs root.
 */
import assert from 'node:assert/strict';
import { constants } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { AF_INET } from '../../../src/kernel/libc.js';
import { setNeighRequest } from '../../../src/kernel/netlink/neigh-ops.js';
import { Rtnetlink, routeAddRequest, routeDeleteRequest } from '../../../src/kernel/netlink/rtnetlink.js';
import type { Link } from '../../../src/kernel/netlink/types.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

describe('rtnetlink batches', { skip: notRoot && 'needs root' }, () => {
  let ns: TestNetns | undefined;
  let nl: Rtnetlink | undefined;
  let dev: Link;

  before(() => {
    ns = TestNetns.create();
    nl = ns.enter(() => Rtnetlink.open({ asyncSockets: 2 }));
    dev = nl.addVeth({ name: 'pw-b0', peerName: 'pw-b1', mtu: 1500 });
    nl.setLinkUp(dev.index);
    nl.addAddress(dev.index, { address: '10.9.0.1', prefixLength: 24 });
  });

  after(() => {
    try {
      nl?.close();
    } finally {
      ns?.delete();
    }
  });

  const routesTo = (n: number, base: number) =>
    Array.from({ length: n }, (_, i) => `10.${base + (i >> 8)}.${i & 255}.0/24`);
  const ours = (l: Rtnetlink) =>
    l
      .routes({ family: AF_INET, oif: dev.index })
      .filter((r) => r.protocol === 250)
      .map((r) => r.dst)
      .sort();

  for (const [name, open] of [
    ['worker thread (async sockets)', () => nl as Rtnetlink],
    ['synchronous socket', () => (ns as TestNetns).enter(() => Rtnetlink.open())],
  ] as const) {
    test(`${name}: 1000 routes over 8 datagrams, all applied; then all deleted`, async () => {
      const l = open();
      try {
        const dsts = routesTo(1000, 20);
        const add = dsts.map((dst) =>
          routeAddRequest({ dst, gateway: '10.9.0.2', oif: dev.index, protocol: 250 }),
        );
        assert.deepEqual(await l.batch(add), []);
        assert.deepEqual(ours(l), [...dsts].sort());
        const del = dsts.map((dst) => routeDeleteRequest({ dst, gateway: '10.9.0.2', oif: dev.index }));
        assert.deepEqual(await l.batch(del), []);
        assert.deepEqual(ours(l), []);
      } finally {
        if (l !== nl) l.close();
      }
    });
  }

  test('a refused request is reported by index and errno; the others are applied', async () => {
    const l = nl as Rtnetlink;
    const dsts = routesTo(300, 40);
    const requests = dsts.map((dst) =>
      routeAddRequest({ dst, gateway: '10.9.0.2', oif: dev.index, protocol: 250 }),
    );
    // The same destination twice (EEXIST), and a neighbour on a link that does not exist (ENODEV).
    requests.splice(
      150,
      0,
      routeAddRequest({ dst: dsts[10] as string, gateway: '10.9.0.2', oif: dev.index }),
    );
    requests.push(setNeighRequest({ index: 99999, address: '10.9.0.7', mac: '02:00:00:00:00:07' }));
    const failures = await l.batch(requests);
    assert.deepEqual(
      failures.map((f) => [f.index, f.error.errno]),
      [
        [150, constants.errno.EEXIST],
        [301, constants.errno.ENODEV],
      ],
    );
    assert.deepEqual(ours(l), [...dsts].sort());
    assert.deepEqual(
      await l.batch(dsts.map((dst) => routeDeleteRequest({ dst, gateway: '10.9.0.2', oif: dev.index }))),
      [],
    );
    // Deleting again: every request refused with ESRCH, none thrown.
    const again = await l.batch(
      dsts.map((dst) => routeDeleteRequest({ dst, gateway: '10.9.0.2', oif: dev.index })),
    );
    assert.equal(again.length, 300);
    assert.ok(again.every((f) => f.error.errno === constants.errno.ESRCH));
  });
});
