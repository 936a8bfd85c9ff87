/**
 * The checksum hop through the agent (decision 32, src/datapath/checksum-ifb.ts): ADD leaves the pod's
 * host veth redirecting its ingress to the node's IFB and the pod's transmit checksumming on (Linux
 * bridge); CHECK names a host veth whose redirect is gone; the agent's restart (reconcile) puts it
 * back, as it does for pods made before the hop existed.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { netnsPath } from '../../bed/namespaces.js';
import { TestNode } from '../../bed/node.js';
import { CHECKSUM_IFB } from '../../src/datapath/checksum-ifb.js';
import { EthtoolSocket } from '../../src/kernel/ethtool.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';

const node = new TestNode({ podCIDRs: ['10.244.7.0/24'] });
before(() => node.setup());
after(() => node.cleanup());

async function redirects(veth: string): Promise<number> {
  const shown = JSON.parse(
    await must('tc', ['-n', node.nodeNs, '-j', 'filter', 'show', 'dev', veth, 'ingress']),
  );
  return shown.filter(
    (f: { options?: { actions?: Array<{ to_dev?: string }> } }) =>
      f.options?.actions?.[0]?.to_dev === CHECKSUM_IFB,
  ).length;
}

function txChecksumming(ns: string, ifname: string): boolean {
  using home = NetnsHandle.current();
  using target = NetnsHandle.open(netnsPath(ns));
  using eth = inNetns(target, home, () => EthtoolSocket.open());
  return eth.txChecksumming(ifname);
}

test('ADD redirects the host veth to the IFB; CHECK names it without; the restart puts it back', async () => {
  const pod = await node.addPod('a');
  const add = await node.cni({ command: 'ADD', containerId: 'ctr-hop', netns: pod });
  assert.equal(add.code, 0, add.stdout);
  const veth = (add.json?.interfaces as Array<{ name: string }> | undefined)?.[0]?.name ?? '';
  assert.equal(await redirects(veth), 1);
  assert.equal(txChecksumming(node.nodeNs, CHECKSUM_IFB), false, "the IFB's transmit checksumming");
  assert.equal(txChecksumming(pod, 'eth0'), true, "the pod's: the hop completes what it leaves pending");
  const check = () =>
    node.cni({ command: 'CHECK', containerId: 'ctr-hop', netns: pod, conf: { prevResult: add.json } });
  assert.equal((await check()).code, 0);

  await must('tc', ['-n', node.nodeNs, 'qdisc', 'del', 'dev', veth, 'ingress']);
  const failed = await check();
  assert.notEqual(failed.code, 0);
  assert.match(failed.stdout, new RegExp(`${veth}.*${CHECKSUM_IFB}`));

  await node.stopAgent();
  await node.startAgent();
  assert.equal(await redirects(veth), 1, 'reconcile put the redirect back');
  assert.equal((await check()).code, 0);
  const del = await node.cni({ command: 'DEL', containerId: 'ctr-hop', netns: pod });
  assert.equal(del.code, 0, del.stdout);
});
