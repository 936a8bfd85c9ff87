/**
 * The checksum hop (src/datapath/checksum-ifb.ts, decision 32) on the Linux bridge, in a throwaway node
 * namespace (I7): start() makes the node's IFB with transmit checksumming off and adopts it again; a
 * pod port's ingress is redirected to it before the port comes up; CHECK names a host veth whose
 * redirect is gone, and a re-attach (reconcile) puts it back. What the hop stops is in the spoofing
 * suite (spoofing.ts, the checksum forgeries).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { PodwireError } from '../../src/base/errors.js';
import { CHECKSUM_IFB } from '../../src/datapath/checksum-ifb.js';
import { BridgeDatapath } from '../../src/datapath/linux-bridge/bridge-datapath.js';
import { EthtoolSocket } from '../../src/kernel/ethtool.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import { type SysctlWriter, writeSysctl } from '../../src/kernel/sysctl.js';

const spaces = new NamespaceSet();
let nodeNs = '';
let home: NetnsHandle;
let node: NetnsHandle;
let nl: Rtnetlink;

function datapath(): BridgeDatapath {
  const sysctl: SysctlWriter = (key, value) => inNetns(node, home, () => writeSysctl(key, value));
  return new BridgeDatapath({
    nl,
    sysctl,
    nft: nftIn(nodeNs),
    bridge: 'pwtcs0',
    mtu: 1500,
    podGuards: false,
    warn: () => undefined,
    gateways: [{ family: 4, address: '10.250.1.1', prefixLength: 24 }],
  });
}

function ifbTxChecksumming(): boolean {
  using eth = inNetns(node, home, () => EthtoolSocket.open());
  return eth.txChecksumming(CHECKSUM_IFB);
}

before(async () => {
  nodeNs = await spaces.add('csum');
  home = NetnsHandle.current();
  node = NetnsHandle.open(netnsPath(nodeNs));
  nl = inNetns(node, home, () => Rtnetlink.open());
});
after(async () => {
  nl?.close();
  node?.close();
  home?.close();
  await spaces.cleanup();
});

test('the IFB: made with transmit checksumming off and up, adopted and turned off again at the next start', async () => {
  const dp = datapath();
  await dp.start();
  const ifb = nl.linkByName(CHECKSUM_IFB);
  assert.equal(ifb?.kind, 'ifb');
  assert.equal(ifb?.up, true);
  assert.equal(ifbTxChecksumming(), false);
  await dp.stop();
  {
    using eth = inNetns(node, home, () => EthtoolSocket.open());
    eth.setTxChecksumming(CHECKSUM_IFB, true);
  }
  const again = datapath();
  await again.start();
  assert.equal(nl.linkByName(CHECKSUM_IFB)?.index, ifb?.index, 'the same IFB');
  assert.equal(ifbTxChecksumming(), false);
  await again.stop();
});

test('a pod port is redirected to the IFB; CHECK names it once the redirect is gone; a re-attach restores it', async () => {
  const dp = datapath();
  await dp.start();
  try {
    await must('ip', ['-n', nodeNs, 'link', 'add', 'pwtcs1', 'type', 'veth', 'peer', 'name', 'pwtcs1p']);
    await must('ip', ['-n', nodeNs, 'link', 'set', 'pwtcs1p', 'up']);
    const link = nl.linkByName('pwtcs1');
    assert.ok(link);
    const port = {
      hostIfname: 'pwtcs1',
      hostIfindex: link.index,
      containerId: 'c1',
      ifname: 'eth0',
      podMac: '0a:58:0a:fa:01:02',
      podIps: ['10.250.1.2'],
    };
    await dp.attachPort(port);
    const shown = JSON.parse(
      await must('tc', ['-n', nodeNs, '-j', 'filter', 'show', 'dev', 'pwtcs1', 'ingress']),
    );
    const redirects = shown.filter(
      (f: { options?: { actions?: Array<{ to_dev?: string }> } }) =>
        f.options?.actions?.[0]?.to_dev === CHECKSUM_IFB,
    );
    assert.equal(redirects.length, 1, JSON.stringify(shown));
    await dp.checkPort('pwtcs1');
    await dp.attachPort(port);
    assert.equal(
      JSON.parse(await must('tc', ['-n', nodeNs, '-j', 'filter', 'show', 'dev', 'pwtcs1', 'ingress'])).length,
      shown.length,
      'attaching again adds no second filter',
    );

    await must('tc', ['-n', nodeNs, 'qdisc', 'del', 'dev', 'pwtcs1', 'ingress']);
    await assert.rejects(
      dp.checkPort('pwtcs1'),
      (err) =>
        err instanceof PodwireError &&
        err.code === 'ERR_CHECK_FAILED' &&
        err.message.includes('pwtcs1') &&
        err.message.includes(CHECKSUM_IFB),
    );
    // A re-attach after a restart (reconcile: no MAC) puts it back.
    await dp.attachPort({ ...port, podMac: '' });
    await dp.checkPort('pwtcs1');
  } finally {
    await dp.stop();
  }
});
