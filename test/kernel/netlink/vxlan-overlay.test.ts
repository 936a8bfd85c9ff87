/**
 * A flannel-style VXLAN overlay between two throwaway namespaces ("nodes") joined by a veth underlay,
 * programmed only through rtnetlink: the vxlan devices, one fdb entry, one neighbour and one route
 * per remote. A ping between the vxlan addresses proves the tunnel carries traffic; the dumps are
 * compared with `ip -j -d link`, `ip -j neigh` and `bridge -j fdb show`. Needs root and the vxlan
 * module.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync } from 'node:fs';
import { after, before, describe, type TestContext, test } from 'node:test';
import { AF_INET, KernelError } from '../../../src/kernel/libc.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import type { Link } from '../../../src/kernel/netlink/types.js';
import * as N from '../../../src/kernel/netlink/uapi/neighbour.js';
import { fdbKey, type IpFdb, ipFdbKey } from '../codec/neigh-json.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;
const EEXIST = 17;
const EOPNOTSUPP = 95;

const VNI = 42;
const PORT = 4789;
/** Per node: underlay IP, VTEP MAC, the vxlan device's /32 and the pod CIDR behind it (as flannel). */
const NODES = [
  { underlay: '192.168.77.1', mac: '02:70:77:00:00:0a', vtep: '10.244.0.0', pods: '10.244.0.0/24' },
  { underlay: '192.168.77.2', mac: '02:70:77:00:00:0b', vtep: '10.244.1.0', pods: '10.244.1.0/24' },
] as const;

interface Node {
  ns: TestNetns;
  nl: Rtnetlink;
  underlay: Link;
  vx?: Link;
}

function bridgeFdb(ns: TestNetns, ...args: string[]): IpFdb[] {
  const out = execFileSync('bridge', ['-n', ns.name, '-j', 'fdb', 'show', ...args], { encoding: 'utf8' });
  return JSON.parse(out === '' ? '[]' : out) as IpFdb[];
}

/** Pings `to` from `from` inside the namespace; true when a reply came back. */
function ping(ns: TestNetns, from: string, to: string, waitSeconds: number): boolean {
  const r = spawnSync(
    'ip',
    [
      'netns',
      'exec',
      ns.name,
      'ping',
      '-n',
      '-q',
      '-c',
      '2',
      '-i',
      '0.2',
      '-W',
      `${waitSeconds}`,
      '-I',
      from,
      to,
    ],
    { encoding: 'utf8', timeout: 15_000 },
  );
  if (r.error) throw r.error;
  return r.status === 0;
}

function rxPackets(ns: TestNetns, name: string): number {
  const [link] = ns.ipJson<{ stats64: { rx: { packets: number } } }[]>('-s', 'link', 'show', 'dev', name);
  assert.ok(link);
  return link.stats64.rx.packets;
}

describe('a VXLAN overlay between two namespaces', { skip: notRoot && 'needs root' }, () => {
  const nodes: Node[] = [];
  /** Set when the kernel has no vxlan link type: every test then skips, saying so. */
  let vxlanMissing: string | undefined;

  before(() => {
    const a = TestNetns.create();
    const partial: Partial<Node>[] = [{ ns: a }];
    try {
      const b = TestNetns.create();
      partial.push({ ns: b });
      const nlA = a.enter(() => Rtnetlink.open());
      partial[0] = { ns: a, nl: nlA };
      const nlB = b.enter(() => Rtnetlink.open());
      partial[1] = { ns: b, nl: nlB };
      const fd = b.openFd();
      let uA: Link;
      try {
        uA = nlA.addVeth({ name: 'pw-u0', peerName: 'pw-u1', mtu: 1500, peerNetnsFd: fd });
      } finally {
        closeSync(fd);
      }
      const uB = nlB.linkByName('pw-u1');
      assert.ok(uB);
      nodes.push({ ns: a, nl: nlA, underlay: uA }, { ns: b, nl: nlB, underlay: uB });
    } catch (err) {
      for (const p of partial) p.nl?.close();
      for (const p of partial) p.ns?.delete();
      throw err;
    }
    for (const [i, node] of nodes.entries()) {
      const cfg = NODES[i];
      assert.ok(cfg);
      node.nl.setLinkUp(node.underlay.index);
      node.nl.addAddress(node.underlay.index, { address: cfg.underlay, prefixLength: 24 });
      try {
        node.vx = node.nl.addVxlan({
          name: 'pw-vx0',
          vni: VNI,
          port: PORT,
          local: cfg.underlay,
          underlayIndex: node.underlay.index,
          mtu: 1450,
          mac: cfg.mac,
        });
      } catch (err) {
        if (err instanceof KernelError && err.errno === EOPNOTSUPP) {
          vxlanMissing = `the kernel has no vxlan link type (module unavailable): ${err.message}`;
          return;
        }
        throw err;
      }
      node.nl.setLinkUp(node.vx.index);
      node.nl.addAddress(node.vx.index, { address: cfg.vtep, prefixLength: 32 });
    }
  });

  after(() => {
    // Every namespace goes, whatever failed before.
    try {
      for (const n of nodes) n.nl.close();
    } finally {
      for (const n of nodes) n.ns.delete();
    }
  });

  /** The two nodes with their vxlan devices, or undefined after skipping the test. */
  const ctx = (t: TestContext) => {
    if (vxlanMissing !== undefined) {
      t.skip(vxlanMissing);
      return undefined;
    }
    const [a, b] = nodes;
    assert.ok(a?.vx && b?.vx);
    return { a: { ...a, vx: a.vx }, b: { ...b, vx: b.vx } };
  };

  test('addVxlan creates the device `ip -d link` describes, and Link.vxlan reads it back', (t) => {
    const c = ctx(t);
    if (!c) return;
    const { a } = c;
    assert.equal(a.vx.kind, 'vxlan');
    assert.equal(a.vx.mac, NODES[0].mac);
    assert.equal(a.vx.mtu, 1450);
    assert.deepStrictEqual(a.vx.vxlan, {
      vni: VNI,
      port: PORT,
      local: NODES[0].underlay,
      underlayIndex: a.underlay.index,
      learning: false,
    });
    const [shown] = a.ns.ipJson<
      {
        mtu: number;
        address: string;
        linkinfo: {
          info_kind: string;
          info_data: { id: number; port: number; local: string; link: string; learning: boolean };
        };
      }[]
    >('-d', 'link', 'show', 'dev', 'pw-vx0');
    assert.ok(shown);
    const d = shown.linkinfo.info_data;
    assert.deepStrictEqual(
      { vni: d.id, port: d.port, local: d.local, underlay: d.link, learning: d.learning },
      { vni: VNI, port: PORT, local: NODES[0].underlay, underlay: 'pw-u0', learning: false },
    );
    // The dump decodes it the same way as the single get.
    assert.deepStrictEqual(
      a.nl.links().find((l) => l.index === a.vx.index)?.vxlan,
      a.nl.linkByIndex(a.vx.index)?.vxlan,
    );
  });

  test('learning: true is sent as such; an explicit IPv6 local goes in IFLA_VXLAN_LOCAL6', (t) => {
    const c = ctx(t);
    if (!c) return;
    const { a } = c;
    const vx = a.nl.addVxlan({
      name: 'pw-vx6',
      vni: 7,
      port: 8472,
      local: 'fd00:77::1',
      mtu: 1400,
      learning: true,
    });
    try {
      assert.deepStrictEqual(vx.vxlan, { vni: 7, port: 8472, local: 'fd00:77::1', learning: true });
    } finally {
      a.nl.deleteLink(vx.index);
    }
  });

  test('a second device on the same VNI and port, or with the same name, fails with EEXIST', (t) => {
    const c = ctx(t);
    if (!c) return;
    const { a } = c;
    const spec = { vni: VNI, port: PORT, local: NODES[0].underlay, mtu: 1450 };
    assert.throws(
      () => a.nl.addVxlan({ ...spec, name: 'pw-vx1' }),
      (err: unknown) =>
        err instanceof KernelError &&
        err.errno === EEXIST &&
        err.syscall === 'RTM_NEWLINK' &&
        // The kernel's extended ack says why (drivers/net/vxlan: "...VNI already exists").
        /VNI/.test(err.extack ?? ''),
    );
    assert.throws(
      () => a.nl.addVxlan({ ...spec, name: 'pw-vx0', vni: VNI + 1 }),
      (err: unknown) => err instanceof KernelError && err.errno === EEXIST,
    );
    assert.equal(a.nl.linkByName('pw-vx1'), undefined);
  });

  test('fdb: setFdb adds a permanent self entry; replace moves the remote; the dump matches bridge fdb', (t) => {
    const c = ctx(t);
    if (!c) return;
    const { a } = c;
    const mac = '02:70:77:00:00:ee';
    a.nl.setFdb({ index: a.vx.index, mac, dst: '192.168.77.50' });
    assert.deepStrictEqual(
      a.nl.fdb({ index: a.vx.index }).filter((e) => e.mac === mac),
      [{ index: a.vx.index, mac, dst: '192.168.77.50', state: N.NUD_PERMANENT, flags: N.NTF_SELF }],
    );
    // NLM_F_REPLACE on a unicast MAC replaces its remote instead of adding a second one.
    a.nl.setFdb({ index: a.vx.index, mac, dst: '192.168.77.51' });
    assert.deepStrictEqual(
      a.nl
        .fdb({ index: a.vx.index })
        .filter((e) => e.mac === mac)
        .map((e) => e.dst),
      ['192.168.77.51'],
    );
    assert.deepStrictEqual(
      bridgeFdb(a.ns, 'dev', 'pw-vx0')
        .filter((e) => e.mac === mac)
        .map((e) => ipFdbKey(e, 'pw-vx0')),
      [`${mac} dev pw-vx0 dst 192.168.77.51 master - vlan - self permanent`],
    );
    // The whole dump (every device's own entries, multicast included) as bridge sees it.
    const links = a.nl.links();
    assert.deepStrictEqual(
      a.nl
        .fdb()
        .map((e) => fdbKey(e, links))
        .sort(),
      bridgeFdb(a.ns)
        .map((e) => ipFdbKey(e))
        .sort(),
    );
    assert.ok(a.nl.fdb({ index: a.vx.index }).every((e) => e.index === a.vx.index));
    assert.equal(a.nl.deleteFdb({ index: a.vx.index, mac }), true);
  });

  test('deleteFdb and deleteNeigh are false on absent entries, and a wrong dst deletes nothing', (t) => {
    const c = ctx(t);
    if (!c) return;
    const { a } = c;
    const mac = '02:70:77:00:00:dd';
    assert.equal(a.nl.deleteFdb({ index: a.vx.index, mac }), false);
    a.nl.setFdb({ index: a.vx.index, mac, dst: '192.168.77.60' });
    assert.equal(a.nl.deleteFdb({ index: a.vx.index, mac, dst: '192.168.77.61' }), false);
    assert.equal(a.nl.fdb({ index: a.vx.index }).filter((e) => e.mac === mac).length, 1);
    assert.equal(a.nl.deleteFdb({ index: a.vx.index, mac, dst: '192.168.77.60' }), true);
    assert.equal(a.nl.deleteFdb({ index: a.vx.index, mac, dst: '192.168.77.60' }), false);
    assert.equal(a.nl.deleteFdb({ index: a.vx.index, mac }), false);
    assert.deepStrictEqual(
      bridgeFdb(a.ns, 'dev', 'pw-vx0').filter((e) => e.mac === mac),
      [],
    );
    assert.equal(a.nl.deleteNeigh({ index: a.vx.index, address: '10.244.9.0' }), false);
  });

  test('with fdb + neighbour + route on both nodes, a ping crosses the tunnel; without the fdb entry it does not', (t) => {
    const c = ctx(t);
    if (!c) return;
    const pairs = [
      [c.a, NODES[1]],
      [c.b, NODES[0]],
    ] as const;
    // What flannel's vxlan backend programs for each remote node.
    for (const [node, remote] of pairs) {
      node.nl.setFdb({ index: node.vx.index, mac: remote.mac, dst: remote.underlay });
      node.nl.setNeigh({ index: node.vx.index, address: remote.vtep, mac: remote.mac });
      node.nl.addRoute({ dst: remote.pods, gateway: remote.vtep, oif: node.vx.index, onlink: true });
    }
    for (const [node, remote] of pairs) {
      assert.deepStrictEqual(
        node.nl.fdb({ index: node.vx.index }).filter((e) => e.mac === remote.mac),
        [
          {
            index: node.vx.index,
            mac: remote.mac,
            dst: remote.underlay,
            state: N.NUD_PERMANENT,
            flags: N.NTF_SELF,
          },
        ],
      );
      const neigh = node.nl.neighbours({ index: node.vx.index, family: AF_INET });
      assert.deepStrictEqual(
        neigh.filter((n) => n.address === remote.vtep),
        [
          {
            index: node.vx.index,
            family: AF_INET,
            address: remote.vtep,
            mac: remote.mac,
            state: N.NUD_PERMANENT,
            flags: 0,
          },
        ],
      );
      const shown = node.ns.ipJson<{ dst: string; lladdr: string; state: string[] }[]>(
        'neigh',
        'show',
        'dev',
        'pw-vx0',
        remote.vtep,
      );
      assert.deepStrictEqual(
        shown.map((e) => [e.dst, e.lladdr, e.state]),
        [[remote.vtep, remote.mac, ['PERMANENT']]],
      );
      const route = node.nl
        .routes({ family: AF_INET, oif: node.vx.index })
        .find((r) => r.dst === remote.pods);
      assert.equal(route?.gateway, remote.vtep);
    }

    const { a, b } = c;
    const before = rxPackets(b.ns, 'pw-vx0');
    assert.ok(ping(a.ns, NODES[0].vtep, NODES[1].vtep, 3), 'ping across the tunnel failed');
    assert.ok(
      rxPackets(b.ns, 'pw-vx0') >= before + 2,
      'the echo requests did not arrive on the remote vxlan device',
    );
    assert.ok(ping(b.ns, NODES[1].vtep, NODES[0].vtep, 3), 'ping back across the tunnel failed');

    // Without a remote for B's MAC (and no default remote, nolearning) the frames have nowhere to go.
    assert.equal(a.nl.deleteFdb({ index: a.vx.index, mac: NODES[1].mac }), true);
    assert.equal(ping(a.ns, NODES[0].vtep, NODES[1].vtep, 1), false);
    a.nl.setFdb({ index: a.vx.index, mac: NODES[1].mac, dst: NODES[1].underlay });
    assert.ok(ping(a.ns, NODES[0].vtep, NODES[1].vtep, 3), 'ping failed after restoring the fdb entry');
  });
});
