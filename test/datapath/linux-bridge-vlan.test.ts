/**
 * Pool VLANs on the Linux bridge datapath (decision 15), on a kernel that has bridge VLAN filtering
 * and 802.1Q devices. These machines' kernel has neither, so here the suite skips;
 * `npm run test:vm` runs it in a guest on Debian's kernel.
 *
 * A node namespace runs the datapath with an uplink (a veth) into a "switch" namespace whose 802.1Q
 * device `sw0.100` holds 10.100.0.1, VLAN 100's router address. Pods of VLAN 100 reach it and each
 * other; a pod of VLAN 200 over the same subnet reaches neither; an untagged pod still reaches its
 * gateway. The ports' VLAN membership is read back from the kernel.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must, run } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { configurePodInterface } from '../../src/agent/cni/pod-interface.js';
import { BridgeDatapath } from '../../src/datapath/linux-bridge/bridge-datapath.js';
import type { Allocation } from '../../src/ipam/allocator.js';
import { NfTables } from '../../src/kernel/netlink/nf-tables.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import { type SysctlWriter, writeSysctl } from '../../src/kernel/sysctl.js';

const notRoot = process.getuid?.() !== 0;

/** Whether this kernel has bridge VLAN filtering and 802.1Q devices, asked in a throwaway namespace. */
async function kernelHasVlans(): Promise<boolean> {
  if (notRoot) return false;
  const spaces = new NamespaceSet();
  try {
    const ns = await spaces.add('vlanprobe');
    const br = await run('ip', ['-n', ns, 'link', 'add', 'br0', 'type', 'bridge', 'vlan_filtering', '1']);
    const vlan = await run('ip', [
      '-n',
      ns,
      'link',
      'add',
      'link',
      'br0',
      'name',
      'br0.5',
      'type',
      'vlan',
      'id',
      '5',
    ]);
    return br.code === 0 && vlan.code === 0;
  } finally {
    await spaces.cleanup();
  }
}

/** Equivalent to: `ip -n NS link add link PARENT name PARENT.VID type vlan id VID`, an address, up. */
async function addVlanDevice(ns: string, parent: string, vid: number, cidr: string): Promise<void> {
  const name = `${parent}.${vid}`;
  await must('ip', [
    '-n',
    ns,
    'link',
    'add',
    'link',
    parent,
    'name',
    name,
    'type',
    'vlan',
    'id',
    String(vid),
  ]);
  await must('ip', ['-n', ns, 'addr', 'add', cidr, 'dev', name]);
  await must('ip', ['-n', ns, 'link', 'set', name, 'up']);
}

// In the guest of `npm run test:vm` (PODWIRE_VM_GUEST=1) a kernel without them is a failure, not a skip.
const skip = notRoot
  ? 'needs root'
  : process.env.PODWIRE_VM_GUEST !== '1' &&
    !(await kernelHasVlans()) &&
    'this kernel has no bridge VLAN filtering or 802.1Q devices (npm run test:vm runs this suite)';

describe('Linux bridge datapath: pool VLANs', { skip }, () => {
  const spaces = new NamespaceSet();
  const handles: NetnsHandle[] = [];
  /** The pod guards' nf_tables sockets in the node namespace. */
  const nfs: NfTables[] = [];
  const track = (nf: NfTables) => {
    nfs.push(nf);
    return nf;
  };
  let nl: Rtnetlink;
  let dp: BridgeDatapath;
  let home: NetnsHandle;
  let nodeNs = '';
  let switchNs = '';
  let next = 2;
  const pods: Record<string, { ns: string; ip: string; host: string }> = {};

  /** A pod whose host veth is attached with `vlan` (0: untagged, in the pod CIDR). */
  async function pod(name: string, vlan: number): Promise<void> {
    const ns = await spaces.add(`vp-${name}`);
    const n = next++;
    const ip = vlan === 0 ? `10.250.0.${n}` : `10.100.0.${n}`;
    using podNs = NetnsHandle.open(netnsPath(ns));
    const host = `pwtvp${n}`;
    const link = nl.addVeth({ name: host, peerName: 'eth0', mtu: 1500, peerNetnsFd: podNs.fd });
    using podNl = inNetns(podNs, home, () => Rtnetlink.open());
    const alloc: Allocation = {
      ip,
      prefixLength: 24,
      gateway: vlan === 0 ? '10.250.0.1' : '10.100.0.1',
      family: 4,
      rangeId: 'test',
    };
    const iface = configurePodInterface(podNl, 'eth0', [alloc]);
    await dp.attachPort({
      hostIfname: host,
      hostIfindex: link.index,
      containerId: name,
      ifname: 'eth0',
      podMac: iface.mac,
      podIps: [ip],
      vlan,
    });
    pods[name] = { ns, ip, host };
  }

  /** `bridge vlan show dev IFNAME` in the node namespace, as "vid[:pvid][:untagged]". */
  async function vlansOf(ifname: string): Promise<string[]> {
    const out = await must('ip', ['netns', 'exec', nodeNs, 'bridge', '-j', 'vlan', 'show', 'dev', ifname]);
    const rows = JSON.parse(out || '[]') as Array<{ vlans?: Array<{ vlan: number; flags?: string[] }> }>;
    return (rows[0]?.vlans ?? [])
      .map((v) => [v.vlan, ...(v.flags ?? []).map((f) => (f === 'PVID' ? 'pvid' : 'untagged'))].join(':'))
      .sort();
  }

  const ping = async (from: string, to: string) =>
    (await run('ip', ['netns', 'exec', pods[from]?.ns ?? '', 'ping', '-c', '1', '-W', '1', to])).code === 0;

  before(async () => {
    nodeNs = await spaces.add('vnode');
    switchNs = await spaces.add('vswitch');
    home = NetnsHandle.current();
    handles.push(home);
    const node = NetnsHandle.open(netnsPath(nodeNs));
    handles.push(node);
    nl = inNetns(node, home, () => Rtnetlink.open());
    const sysctl: SysctlWriter = (key, value) => inNetns(node, home, () => writeSysctl(key, value));
    dp = new BridgeDatapath({
      nl,
      sysctl,
      nft: nftIn(nodeNs),
      nf: track(inNetns(node, home, () => NfTables.open())),
      bridge: 'pwtbr-v',
      mtu: 1500,
      gateways: [{ family: 4, address: '10.250.0.1', prefixLength: 24 }],
    });
    await dp.start();
    await must('ip', [
      '-n',
      nodeNs,
      'link',
      'add',
      'pwtup0',
      'type',
      'veth',
      'peer',
      'name',
      'sw0',
      'netns',
      switchNs,
    ]);
    await must('ip', ['-n', switchNs, 'link', 'set', 'sw0', 'up']);
    await addVlanDevice(switchNs, 'sw0', 100, '10.100.0.1/24');
    const up = nl.linkByName('pwtup0');
    assert.ok(up?.mac);
    await dp.attachUplink({ ifname: 'pwtup0', index: up.index, mac: up.mac, ips: [] });
    await pod('a100', 100);
    await pod('b100', 100);
    await pod('c200', 200);
    await pod('plain', 0);
  });

  after(async () => {
    await dp?.stop();
    nl?.close();
    for (const n of nfs) n.close();
    for (const h of handles) h.close();
    await spaces.cleanup();
  });

  test("each pod's port is an untagged member of its VLAN only; the uplink carries them tagged", async () => {
    assert.deepEqual(await vlansOf(pods.a100?.host ?? ''), ['100:pvid:untagged']);
    assert.deepEqual(await vlansOf(pods.c200?.host ?? ''), ['200:pvid:untagged']);
    assert.deepEqual(await vlansOf(pods.plain?.host ?? ''), ['1:pvid:untagged']);
    assert.deepEqual(await vlansOf('pwtup0'), ['100', '1:pvid:untagged', '200']);
  });

  test('pods of VLAN 100 reach each other and its router; VLAN 200 reaches neither; untagged works', async () => {
    const results = {
      'a100 -> b100': await ping('a100', pods.b100?.ip ?? ''),
      'a100 -> router': await ping('a100', '10.100.0.1'),
      'b100 -> router': await ping('b100', '10.100.0.1'),
      'c200 -> router': await ping('c200', '10.100.0.1'),
      'c200 -> a100': await ping('c200', pods.a100?.ip ?? ''),
      'plain -> gateway': await ping('plain', '10.250.0.1'),
    };
    assert.deepEqual(results, {
      'a100 -> b100': true,
      'a100 -> router': true,
      'b100 -> router': true,
      'c200 -> router': false,
      'c200 -> a100': false,
      'plain -> gateway': true,
    });
  });

  test('a pod that tags its own frames reaches nothing on that VLAN (filtering is on from the start)', async () => {
    const ns = pods.plain?.ns ?? '';
    await addVlanDevice(ns, 'eth0', 100, '10.100.0.99/24');
    assert.equal(await ping('plain', '10.100.0.1'), false);
    await must('ip', ['-n', ns, 'link', 'del', 'eth0.100']);
    // Filtering comes with start, not with the first VLAN pod: a bridge with no pod of a VLAN has it.
    const other = new BridgeDatapath({
      nl,
      sysctl: () => undefined,
      nft: nftIn(nodeNs),
      nf: track(inNetns(handles[1] as NetnsHandle, home, () => NfTables.open())),
      bridge: 'pwtbr-w',
      mtu: 1500,
      gateways: [],
    });
    await other.start();
    const [w] = JSON.parse(await must('ip', ['-n', nodeNs, '-j', '-d', 'link', 'show', 'pwtbr-w'])) as Array<{
      linkinfo: { info_data: { vlan_filtering: number } };
    }>;
    assert.equal(w?.linkinfo.info_data.vlan_filtering, 1);
    await other.stop();
    nl.deleteLinkByName('pwtbr-w');
  });

  test("the uplink taken out and put back (an agent restart) carries the pods' VLANs again", async () => {
    const up = nl.linkByName('pwtup0');
    assert.ok(up?.mac);
    await dp.detachUplink({ ifname: 'pwtup0', index: up.index, targetMac: up.mac });
    assert.equal(await ping('a100', '10.100.0.1'), false, 'cut off while the uplink is out');
    await dp.attachUplink({ ifname: 'pwtup0', index: up.index, mac: up.mac, ips: [] });
    assert.deepEqual(await vlansOf('pwtup0'), ['100', '1:pvid:untagged', '200']);
    assert.equal(await ping('a100', '10.100.0.1'), true);
  });
});
