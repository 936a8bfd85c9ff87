/**
 * The Linux bridge's pod ports are in hairpin mode (decision 19: a pod that reaches a Service backed
 * by itself gets its frame back through its own port), the uplink in bridging mode is not, and CHECK
 * names a pod port that lost it. In a throwaway node namespace (I7).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ipJson, must } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { PodwireError } from '../../src/base/errors.js';
import { BridgeDatapath } from '../../src/datapath/linux-bridge/bridge-datapath.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import { type SysctlWriter, writeSysctl } from '../../src/kernel/sysctl.js';

const spaces = new NamespaceSet();
let nodeNs = '';
let home: NetnsHandle;
let node: NetnsHandle;
let nl: Rtnetlink;
let dp: BridgeDatapath;

/** `ip -d link show DEV`'s hairpin flag, as the kernel reports it to `ip` (not through podwire's codec). */
async function hairpin(dev: string): Promise<boolean | undefined> {
  const [l] = await ipJson<Array<{ linkinfo?: { info_slave_data?: { hairpin?: boolean } } }>>(nodeNs, [
    '-d',
    'link',
    'show',
    dev,
  ]);
  return l?.linkinfo?.info_slave_data?.hairpin;
}

before(async () => {
  nodeNs = await spaces.add('hp');
  home = NetnsHandle.current();
  node = NetnsHandle.open(netnsPath(nodeNs));
  nl = inNetns(node, home, () => Rtnetlink.open());
  const sysctl: SysctlWriter = (key, value) => inNetns(node, home, () => writeSysctl(key, value));
  dp = new BridgeDatapath({
    nl,
    sysctl,
    nft: nftIn(nodeNs),
    bridge: 'pwthp0',
    mtu: 1500,
    // Hairpin alone: the pod guards are tested in linux-bridge-pod-guard.test.ts.
    podGuards: false,
    warn: () => undefined,
    gateways: [{ family: 4, address: '10.250.0.1', prefixLength: 24 }],
  });
  await dp.start();
});
after(async () => {
  await dp?.stop();
  nl?.close();
  node?.close();
  home?.close();
  await spaces.cleanup();
});

test('a pod port is attached in hairpin mode; CHECK fails, naming it, once it is off', async () => {
  await must('ip', ['-n', nodeNs, 'link', 'add', 'pwthp1', 'type', 'veth', 'peer', 'name', 'pwthp1p']);
  const link = nl.linkByName('pwthp1');
  assert.ok(link);
  const port = {
    hostIfname: 'pwthp1',
    hostIfindex: link.index,
    containerId: 'c1',
    ifname: 'eth0',
    podMac: '0a:58:0a:fa:00:02',
    podIps: ['10.250.0.2'],
  };
  await must('ip', ['-n', nodeNs, 'link', 'set', 'pwthp1p', 'up']);
  await dp.attachPort(port);
  assert.equal(await hairpin('pwthp1'), true);
  assert.equal(nl.linkByName('pwthp1')?.bridgePortHairpin, true, 'the codec reads IFLA_BRPORT_MODE');
  await dp.checkPort('pwthp1');
  await must('ip', ['-n', nodeNs, 'link', 'set', 'pwthp1', 'type', 'bridge_slave', 'hairpin', 'off']);
  await assert.rejects(
    dp.checkPort('pwthp1'),
    (err) => err instanceof PodwireError && err.code === 'ERR_CHECK_FAILED' && /hairpin/.test(err.message),
  );
  await dp.attachPort(port);
  await dp.checkPort('pwthp1');
});

test('the uplink attached in bridging mode is not in hairpin mode', async () => {
  await must('ip', ['-n', nodeNs, 'link', 'add', 'pwthpup', 'type', 'veth', 'peer', 'name', 'pwthpupp']);
  await must('ip', ['-n', nodeNs, 'link', 'set', 'pwthpupp', 'up']);
  const link = nl.linkByName('pwthpup');
  assert.ok(link?.mac);
  await dp.attachUplink({ ifname: 'pwthpup', index: link.index, mac: link.mac, ips: [] });
  assert.equal(await hairpin('pwthpup'), false);
  await dp.detachUplink({ ifname: 'pwthpup', index: link.index, targetMac: '02:00:00:00:00:01' });
});
