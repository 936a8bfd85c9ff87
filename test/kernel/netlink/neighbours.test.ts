/**
 * Neighbour (ARP/NDP) entries through rtnetlink against the real kernel, inside a throwaway
 * namespace, compared with `ip -j neigh`. Needs root.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AF_INET, AF_INET6, KernelError } from '../../../src/kernel/libc.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import type { Link } from '../../../src/kernel/netlink/types.js';
import * as N from '../../../src/kernel/netlink/uapi/neighbour.js';
import { type IpNeigh, ipNeighKey, neighKey } from '../codec/neigh-json.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

describe('rtnetlink neighbours', { skip: notRoot && 'needs root' }, () => {
  let ns: TestNetns | undefined;
  let nl: Rtnetlink | undefined;
  let dev: Link;

  before(() => {
    ns = TestNetns.create();
    nl = ns.enter(() => Rtnetlink.open());
    dev = nl.addVeth({ name: 'pw-n0', peerName: 'pw-n1', mtu: 1500 });
    nl.setLinkUp(dev.index);
    nl.addAddress(dev.index, { address: '10.7.0.1', prefixLength: 24 });
    nl.addAddress(dev.index, { address: 'fd00:7::1', prefixLength: 64 }, { nodad: true });
  });

  after(() => {
    try {
      nl?.close();
    } finally {
      ns?.delete();
    }
  });

  const ctx = () => {
    assert.ok(ns && nl);
    return { ns, nl };
  };

  test('setNeigh adds a permanent IPv4 entry; a second call replaces its MAC', () => {
    const { ns, nl } = ctx();
    nl.setNeigh({ index: dev.index, address: '10.7.0.2', mac: '02:00:00:00:07:02' });
    const [first] = nl
      .neighbours({ index: dev.index, family: AF_INET })
      .filter((n) => n.address === '10.7.0.2');
    assert.deepStrictEqual(first, {
      index: dev.index,
      family: AF_INET,
      address: '10.7.0.2',
      mac: '02:00:00:00:07:02',
      state: N.NUD_PERMANENT,
      flags: 0,
    });
    // NLM_F_REPLACE: no EEXIST, the entry now points at the new MAC.
    nl.setNeigh({ index: dev.index, address: '10.7.0.2', mac: '02:00:00:00:07:ff' });
    const entries = nl.neighbours({ index: dev.index }).filter((n) => n.address === '10.7.0.2');
    assert.deepStrictEqual(
      entries.map((n) => n.mac),
      ['02:00:00:00:07:ff'],
    );
    const shown = ns.ipJson<IpNeigh[]>('neigh', 'show', '10.7.0.2', 'dev', 'pw-n0');
    assert.deepStrictEqual(
      shown.map((e) => [e.lladdr, e.state]),
      [['02:00:00:00:07:ff', ['PERMANENT']]],
    );
  });

  test('setNeigh with an IPv6 address writes the NDP table', () => {
    const { ns, nl } = ctx();
    nl.setNeigh({ index: dev.index, address: 'fd00:7::2', mac: '02:00:00:00:07:62' });
    const n = nl.neighbours({ family: AF_INET6 }).find((x) => x.address === 'fd00:7::2');
    assert.equal(n?.mac, '02:00:00:00:07:62');
    assert.equal(n?.state, N.NUD_PERMANENT);
    assert.ok(!nl.neighbours({ family: AF_INET }).some((x) => x.address === 'fd00:7::2'));
    const shown = ns.ipJson<IpNeigh[]>('-6', 'neigh', 'show', 'fd00:7::2');
    assert.equal(shown[0]?.lladdr, '02:00:00:00:07:62');
  });

  test('deleteNeigh is true once, then false; an unknown device is ENODEV, not false', () => {
    const { nl } = ctx();
    nl.setNeigh({ index: dev.index, address: '10.7.0.3', mac: '02:00:00:00:07:03' });
    assert.equal(nl.deleteNeigh({ index: dev.index, address: '10.7.0.3' }), true);
    assert.equal(nl.deleteNeigh({ index: dev.index, address: '10.7.0.3' }), false);
    assert.equal(nl.deleteNeigh({ index: dev.index, address: 'fd00:7::99' }), false);
    assert.ok(!nl.neighbours({ index: dev.index }).some((n) => n.address === '10.7.0.3'));
    assert.throws(
      () => nl.deleteNeigh({ index: 9999, address: '10.7.0.3' }),
      (err: unknown) => err instanceof KernelError && err.errno === 19 && err.syscall === 'RTM_DELNEIGH',
    );
    assert.throws(
      () => nl.setNeigh({ index: 9999, address: '10.7.0.3', mac: '02:00:00:00:07:03' }),
      (err: unknown) => err instanceof KernelError && err.errno === 19 && err.syscall === 'RTM_NEWNEIGH',
    );
  });

  test('the neighbour dump matches ip -j neigh show nud all, per family and device', () => {
    const { ns, nl } = ctx();
    nl.setNeigh({ index: dev.index, address: '10.7.0.4', mac: '02:00:00:00:07:04' });
    const links = nl.links();
    // The kernel adds entries on its own (IPv6 multicast, NOARP): compare a dump that held still.
    for (let attempt = 0; ; attempt++) {
      const ours = nl.neighbours().map((n) => neighKey(n, links));
      const theirs = ns.ipJson<IpNeigh[]>('neigh', 'show', 'nud', 'all').map(ipNeighKey);
      const again = nl.neighbours().map((n) => neighKey(n, links));
      if (JSON.stringify(ours) !== JSON.stringify(again) && attempt < 5) continue;
      assert.deepStrictEqual(ours.sort(), theirs.sort());
      assert.ok(ours.some((k) => k.startsWith('10.7.0.4 dev pw-n0 lladdr 02:00:00:00:07:04 PERMANENT')));
      break;
    }
    assert.ok(nl.neighbours({ family: AF_INET6 }).every((n) => n.family === AF_INET6));
    assert.ok(nl.neighbours({ index: dev.index }).every((n) => n.index === dev.index));
    assert.deepStrictEqual(nl.neighbours({ index: 9999 }), []);
  });
});
