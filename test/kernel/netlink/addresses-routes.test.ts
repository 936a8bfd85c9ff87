/**
 * Addresses and routes through rtnetlink against the real kernel, inside a throwaway namespace,
 * compared with `ip -j addr` and `ip -j route`. Needs root.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AF_INET, AF_INET6, KernelError } from '../../../src/kernel/libc.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import type { Link } from '../../../src/kernel/netlink/types.js';
import { IFA_F_NODAD, IFA_F_PERMANENT, IFA_F_TENTATIVE } from '../../../src/kernel/netlink/uapi/if-addr.js';
import * as R from '../../../src/kernel/netlink/uapi/rtnetlink.js';
import { addrKey, ipAddrKeys, ipRouteView, routeView } from '../codec/ip-json.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

describe('rtnetlink addresses and routes', { skip: notRoot && 'needs root' }, () => {
  let ns: TestNetns | undefined;
  let nl: Rtnetlink | undefined;
  let dev: Link;

  before(() => {
    ns = TestNetns.create();
    nl = ns.enter(() => Rtnetlink.open());
    dev = nl.addVeth({ name: 'pw-v0', peerName: 'pw-v1', mtu: 1500 });
    nl.setLinkUp(dev.index);
    const peer = nl.linkByName('pw-v1');
    assert.ok(peer);
    nl.setLinkUp(peer.index);
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

  test('an IPv4 address (IFA_LOCAL + IFA_ADDRESS)', () => {
    const { ns, nl } = ctx();
    nl.addAddress(dev.index, { address: '10.2.0.1', prefixLength: 24 });
    const [a] = nl.addresses({ index: dev.index, family: AF_INET });
    assert.deepStrictEqual(a, {
      index: dev.index,
      family: AF_INET,
      address: '10.2.0.1',
      prefixLength: 24,
      flags: IFA_F_PERMANENT,
      scope: R.RT_SCOPE_UNIVERSE,
      label: 'pw-v0',
    });
    const shown = ns.ipJson<{ addr_info: { family: string; local: string; prefixlen: number }[] }[]>(
      '-4',
      'addr',
      'show',
      'dev',
      'pw-v0',
    );
    assert.deepStrictEqual(
      shown[0]?.addr_info.map((x) => `${x.local}/${x.prefixlen}`),
      ['10.2.0.1/24'],
    );
  });

  test('an IPv6 address with nodad is usable at once', () => {
    const { ns, nl } = ctx();
    nl.addAddress(dev.index, { address: 'fd00:2::1', prefixLength: 64 }, { nodad: true });
    const a = nl.addresses({ index: dev.index, family: AF_INET6 }).find((x) => x.address === 'fd00:2::1');
    assert.ok(a);
    assert.equal(a.prefixLength, 64);
    assert.ok(a.flags & IFA_F_NODAD);
    assert.equal(a.flags & IFA_F_TENTATIVE, 0);
    const info = ns
      .ipJson<{ addr_info: { local: string; nodad?: boolean; tentative?: boolean }[] }[]>(
        '-6',
        'addr',
        'show',
        'dev',
        'pw-v0',
      )[0]
      ?.addr_info.find((x) => x.local === 'fd00:2::1');
    assert.equal(info?.nodad, true);
    assert.equal(info?.tentative, undefined);
  });

  test('a duplicate address fails with EEXIST; deleting is true once, then false', () => {
    const { nl } = ctx();
    nl.addAddress(dev.index, { address: '10.3.0.1', prefixLength: 16 });
    assert.throws(
      () => nl.addAddress(dev.index, { address: '10.3.0.1', prefixLength: 16 }),
      (err: unknown) => err instanceof KernelError && err.errno === 17 && err.syscall === 'RTM_NEWADDR',
    );
    assert.equal(nl.deleteAddress(dev.index, { address: '10.3.0.1', prefixLength: 16 }), true);
    assert.equal(nl.deleteAddress(dev.index, { address: '10.3.0.1', prefixLength: 16 }), false);
    assert.ok(!nl.addresses({ index: dev.index }).some((a) => a.address === '10.3.0.1'));
  });

  test('the address dump matches ip -j addr show, and filters by family and index', () => {
    const { ns, nl } = ctx();
    const all = nl.addresses();
    assert.deepStrictEqual(
      all.map(addrKey).sort(),
      ipAddrKeys(ns.ipJson<Record<string, unknown>[]>('addr', 'show')),
    );
    assert.ok(nl.addresses({ family: AF_INET6 }).every((a) => a.family === AF_INET6));
    assert.ok(nl.addresses({ index: dev.index }).every((a) => a.index === dev.index));
    assert.ok(nl.addresses({ family: AF_INET }).some((a) => a.address === '10.2.0.1'));
  });

  test('default routes, IPv4 and IPv6, and a link-scope route', () => {
    const { ns, nl } = ctx();
    nl.addRoute({ gateway: '10.2.0.254', oif: dev.index });
    nl.addRoute({ family: AF_INET6, gateway: 'fd00:2::fe', oif: dev.index });
    nl.addRoute({ dst: '10.9.0.0/16', oif: dev.index });
    const v4 = nl.routes({ family: AF_INET });
    const def4 = v4.find((r) => r.dst === undefined);
    assert.deepStrictEqual(
      {
        gateway: def4?.gateway,
        oif: def4?.oif,
        table: def4?.table,
        protocol: def4?.protocol,
        scope: def4?.scope,
      },
      { gateway: '10.2.0.254', oif: dev.index, table: R.RT_TABLE_MAIN, protocol: R.RTPROT_BOOT, scope: 0 },
    );
    assert.equal(v4.find((r) => r.dst === '10.9.0.0/16')?.scope, R.RT_SCOPE_LINK);
    const def6 = nl.routes({ family: AF_INET6 }).find((r) => r.dst === undefined);
    assert.equal(def6?.gateway, 'fd00:2::fe');
    assert.equal(def6?.oif, dev.index);
    const text = ns.ip('route', 'show', 'default');
    assert.match(text, /^default via 10\.2\.0\.254 dev pw-v0/m);
    assert.match(ns.ip('-6', 'route', 'show', 'default'), /^default via fd00:2::fe dev pw-v0/m);
  });

  test('route dumps match ip -j route show', () => {
    const { ns, nl } = ctx();
    const links = nl.links();
    for (const [family, flag] of [
      [AF_INET, '-4'],
      [AF_INET6, '-6'],
    ] as const) {
      const ours = nl
        .routes({ family })
        .map((r) => JSON.stringify(routeView(r, links)))
        .sort();
      const theirs = ns
        .ipJson<Record<string, unknown>[]>(flag, 'route', 'show')
        .map((e) => JSON.stringify(ipRouteView(e)))
        .sort();
      assert.deepStrictEqual(ours, theirs, flag);
      assert.ok(ours.length >= 2);
    }
    assert.ok(nl.routes({ family: AF_INET, oif: dev.index }).every((r) => r.oif === dev.index));
    assert.deepStrictEqual(nl.routes({ family: AF_INET, oif: 999_999 }), []);
  });

  test('a duplicate route fails with EEXIST; deleting is true once, then false', () => {
    const { nl } = ctx();
    nl.addRoute({ dst: '10.8.0.0/16', gateway: '10.2.0.253', oif: dev.index });
    assert.throws(
      () => nl.addRoute({ dst: '10.8.0.0/16', gateway: '10.2.0.253', oif: dev.index }),
      (err: unknown) => err instanceof KernelError && err.errno === 17 && err.syscall === 'RTM_NEWROUTE',
    );
    assert.equal(nl.deleteRoute({ dst: '10.8.0.0/16', gateway: '10.2.0.253', oif: dev.index }), true);
    assert.equal(nl.deleteRoute({ dst: '10.8.0.0/16', gateway: '10.2.0.253', oif: dev.index }), false);
  });

  test('an onlink gateway outside every prefix', () => {
    const { nl } = ctx();
    assert.throws(
      () => nl.addRoute({ dst: '10.7.0.0/16', gateway: '192.0.2.1', oif: dev.index }),
      KernelError,
    );
    nl.addRoute({ dst: '10.7.0.0/16', gateway: '192.0.2.1', oif: dev.index, onlink: true });
    const r = nl.routes({ family: AF_INET }).find((x) => x.dst === '10.7.0.0/16');
    assert.equal(r?.gateway, '192.0.2.1');
    assert.ok((r?.flags ?? 0) & R.RTNH_F_ONLINK);
  });
});
