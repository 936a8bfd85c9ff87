/**
 * Bridge VLAN filtering through rtnetlink against the real kernel, in a throwaway namespace, checked
 * with `bridge -j vlan show` and `ip -d link`. Needs root.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

/** Whether this kernel's bridge can filter VLANs (CONFIG_BRIDGE_VLAN_FILTERING): asked with `ip`. */
function kernelFiltersVlans(): boolean {
  if (notRoot) return false;
  const ns = TestNetns.create();
  try {
    ns.ip('link', 'add', 'pw-probe', 'type', 'bridge', 'vlan_filtering', '1');
    return true;
  } catch {
    return false;
  } finally {
    ns.delete();
  }
}

/** `bridge -j vlan show dev IFNAME`, as "vid[:pvid][:untagged]" strings. */
function bridgeVlans(ns: TestNetns, ifname: string): string[] {
  const out = execFileSync('ip', ['netns', 'exec', ns.name, 'bridge', '-j', 'vlan', 'show', 'dev', ifname], {
    encoding: 'utf8',
  });
  const rows = JSON.parse(out === '' ? '[]' : out) as Array<{
    vlans?: Array<{ vlan: number; flags?: string[] }>;
  }>;
  return (rows[0]?.vlans ?? []).map((v) =>
    [v.vlan, ...(v.flags ?? []).map((f) => (f === 'PVID' ? 'pvid' : 'untagged'))].join(':'),
  );
}

// In the guest of `npm run test:vm` (PODWIRE_VM_GUEST=1) a kernel without it is a failure, not a skip.
const skip = notRoot
  ? 'needs root'
  : process.env.PODWIRE_VM_GUEST !== '1' &&
    !kernelFiltersVlans() &&
    'this kernel has no bridge VLAN filtering (CONFIG_BRIDGE_VLAN_FILTERING)';

describe('rtnetlink bridge VLANs', { skip }, () => {
  let ns: TestNetns | undefined;
  let nl: Rtnetlink | undefined;

  before(() => {
    ns = TestNetns.create();
    nl = ns.enter(() => Rtnetlink.open());
  });

  after(() => {
    try {
      nl?.close();
    } finally {
      ns?.delete();
    }
  });

  test('vlan_filtering on and off, a port as an access port of one VLAN, a trunk, read back', () => {
    assert.ok(ns && nl);
    const br = nl.addBridge({ name: 'pw-br0', mtu: 1500 });
    const veth = nl.addVeth({ name: 'pw-p0', peerName: 'pw-p0-peer', mtu: 1500 });
    const trunk = nl.addVeth({ name: 'pw-t0', peerName: 'pw-t0-peer', mtu: 1500 });
    nl.setMaster(veth.index, br.index);
    nl.setMaster(trunk.index, br.index);

    nl.setBridgeVlanFiltering(br.index, true);
    const filtering = () =>
      ns?.ipJson<Array<{ linkinfo: { info_data: { vlan_filtering: number } } }>>(
        '-d',
        'link',
        'show',
        'pw-br0',
      )[0]?.linkinfo.info_data.vlan_filtering;
    assert.equal(filtering(), 1);
    // A new port is an access port of the default VLAN.
    assert.deepEqual(bridgeVlans(ns, 'pw-p0'), ['1:pvid:untagged']);
    assert.deepEqual(nl.bridgeVlans(veth.index), [{ vid: 1, pvid: true, untagged: true }]);

    nl.addBridgeVlan(veth.index, 100, { pvid: true, untagged: true });
    nl.deleteBridgeVlan(veth.index, 1);
    nl.deleteBridgeVlan(veth.index, 1); // idempotent
    assert.deepEqual(bridgeVlans(ns, 'pw-p0'), ['100:pvid:untagged']);
    assert.deepEqual(nl.bridgeVlans(veth.index), [{ vid: 100, pvid: true, untagged: true }]);

    nl.addBridgeVlan(trunk.index, 100);
    nl.addBridgeVlan(trunk.index, 100); // idempotent
    assert.deepEqual(bridgeVlans(ns, 'pw-t0').sort(), ['100', '1:pvid:untagged']);

    assert.throws(() => nl?.addBridgeVlan(trunk.index, 4095), /not in 1-4094/);
    nl.setBridgeVlanFiltering(br.index, false);
    assert.equal(filtering(), 0);
  });
});

describe('rtnetlink bridge VLANs on a kernel without them', {
  skip: notRoot || (!skip && 'this kernel filters VLANs'),
}, () => {
  test('turning filtering on fails with EOPNOTSUPP, and the bridge is left as it was', () => {
    const ns = TestNetns.create();
    try {
      using nl = ns.enter(() => Rtnetlink.open());
      const br = nl.addBridge({ name: 'pw-br0', mtu: 1500 });
      assert.throws(() => nl.setBridgeVlanFiltering(br.index, true), /EOPNOTSUPP/);
      assert.equal(nl.linkByIndex(br.index)?.kind, 'bridge');
    } finally {
      ns.delete();
    }
  });
});
