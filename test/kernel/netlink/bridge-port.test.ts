/**
 * A bridge port's unicast flooding and the bridge's static forwarding entries through rtnetlink
 * against the real kernel, in a throwaway namespace, checked with `bridge -j fdb show` and `ip -d -j
 * link` (iproute2's reading, not podwire's codec). Needs root.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { isStaticMasterEntry } from '../../../src/kernel/netlink/bridge-port.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import type { Link } from '../../../src/kernel/netlink/types.js';
import * as N from '../../../src/kernel/netlink/uapi/neighbour.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

interface BridgeFdb {
  mac: string;
  ifname?: string;
  master?: string;
  vlan?: number;
  state?: string;
  flags?: string[];
}

function bridgeFdb(ns: TestNetns): BridgeFdb[] {
  const out = execFileSync('ip', ['netns', 'exec', ns.name, 'bridge', '-j', 'fdb', 'show', 'br', 'pw-bp0'], {
    encoding: 'utf8',
  });
  return JSON.parse(out === '' ? '[]' : out) as BridgeFdb[];
}

function slaveData(ns: TestNetns, ifname: string): Record<string, unknown> {
  const [l] = ns.ipJson<Array<{ linkinfo?: { info_slave_data?: Record<string, unknown> } }>>(
    '-d',
    'link',
    'show',
    ifname,
  );
  return l?.linkinfo?.info_slave_data ?? {};
}

describe('rtnetlink bridge port forwarding', { skip: notRoot && 'needs root' }, () => {
  let ns: TestNetns | undefined;
  let nl: Rtnetlink | undefined;
  let a: Link;
  let b: Link;
  const MAC = '0a:58:0a:fa:00:02';

  before(() => {
    ns = TestNetns.create();
    nl = ns.enter(() => Rtnetlink.open());
    ns.ip('link', 'add', 'pw-bp0', 'type', 'bridge');
    const bridge = nl.linkByName('pw-bp0');
    assert.ok(bridge);
    a = nl.addVeth({ name: 'pw-bpa', peerName: 'pw-bpa1', mtu: 1500 });
    b = nl.addVeth({ name: 'pw-bpb', peerName: 'pw-bpb1', mtu: 1500 });
    nl.setMaster(a.index, bridge.index);
    nl.setMaster(b.index, bridge.index);
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

  test('setBridgePortUnicastFlood turns unknown-unicast flooding off and on, leaving broadcast and multicast', () => {
    const { ns, nl } = ctx();
    assert.equal(slaveData(ns, 'pw-bpa').flood, true, 'a new port floods');
    nl.setBridgePortUnicastFlood(a.index, false);
    const off = slaveData(ns, 'pw-bpa');
    assert.deepEqual([off.flood, off.bcast_flood, off.mcast_flood], [false, true, true]);
    assert.equal(
      nl.linkByIndex(a.index)?.bridgePortUnicastFlood,
      false,
      'the codec reads IFLA_BRPORT_UNICAST_FLOOD',
    );
    assert.equal(slaveData(ns, 'pw-bpb').flood, true, 'the other port is left alone');
    assert.equal(nl.linkByIndex(b.index)?.bridgePortUnicastFlood, true);
    nl.setBridgePortUnicastFlood(a.index, true);
    assert.equal(slaveData(ns, 'pw-bpa').flood, true);
  });

  test('setBridgeStaticFdb adds what `bridge fdb` calls static; a second call on another port moves it', () => {
    const { ns, nl } = ctx();
    nl.setBridgeStaticFdb({ index: a.index, mac: MAC });
    nl.setBridgeStaticFdb({ index: a.index, mac: MAC }); // replace: no EEXIST
    const shown = bridgeFdb(ns).filter((e) => e.mac === MAC);
    assert.deepEqual(
      shown.map((e) => [e.ifname, e.master, e.state, e.vlan]),
      [['pw-bpa', 'pw-bp0', 'static', undefined]],
    );
    const mine = nl.bridgePortFdb(a.index).filter((e) => e.mac === MAC);
    assert.equal(mine.length, 1);
    assert.equal(mine[0]?.state, N.NUD_NOARP, 'the bridge reports a static entry as NUD_NOARP');
    assert.ok(mine[0] && isStaticMasterEntry(mine[0]));
    // The port's own MAC is a local entry ("permanent"): not static.
    const own = nl.bridgePortFdb(a.index).find((e) => e.mac === a.mac);
    assert.ok(own, 'the port has its local entry');
    assert.equal(isStaticMasterEntry(own), false);
    assert.ok(
      nl.bridgePortFdb(a.index).every((e) => e.index === a.index),
      'the dump holds the port only',
    );

    nl.setBridgeStaticFdb({ index: b.index, mac: MAC });
    assert.deepEqual(
      bridgeFdb(ns)
        .filter((e) => e.mac === MAC)
        .map((e) => e.ifname),
      ['pw-bpb'],
    );
    assert.equal(nl.bridgePortFdb(a.index).filter((e) => e.mac === MAC).length, 0);
  });

  test('deleteBridgeFdb removes the entry; false when it is not there', () => {
    const { ns, nl } = ctx();
    assert.equal(nl.deleteBridgeFdb({ index: b.index, mac: MAC }), true);
    assert.equal(bridgeFdb(ns).filter((e) => e.mac === MAC).length, 0);
    assert.equal(nl.deleteBridgeFdb({ index: b.index, mac: MAC }), false);
  });

  test('the entries go with the port: none left once it leaves the bridge', () => {
    const { ns, nl } = ctx();
    nl.setBridgeStaticFdb({ index: a.index, mac: MAC });
    nl.setMaster(a.index, 0);
    assert.equal(bridgeFdb(ns).filter((e) => e.mac === MAC).length, 0);
  });
});
