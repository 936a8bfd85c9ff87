/**
 * `podwire gc` (reconcile while the agent serves) against CNI calls that run while it is held right
 * after its listing (the fault seam: its first `store.list` held after it has read). Both found in
 * review and reproduced first on the real kernel, Linux bridge with the pod guards:
 *
 * 1. A pod ADDed after the listing lost its bridge port and its guards: the last sweep (pod ports
 *    whose veth and claims are gone) judged ports against the listing. Depends on the fresh judgement
 *    in src/agent/cni/reconcile.ts (`orphans`: claimed now, or its veth exists, or busy now: kept).
 * 2. A pod DELeted and ADDed again (same attachment, new address) after the listing was re-attached
 *    with its old address: its guards then dropped its own traffic and let the released address
 *    through. Depends on reconcile reading the claims inside the attachment's turn
 *    (`ctx.ipam.lookup(att)` in the kept path), not the listing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ipJson, run } from '../../bed/exec.js';
import { resultIps } from '../../bed/node.js';
import { hostVethName } from '../../src/agent/cni/host-veth.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import { callAgent } from '../../src/cli/control-client.js';
import { FaultNode } from './fault/fault-node.js';

const CIDR = '10.244.63';

describe('podwire gc held after its listing, CNI calls meanwhile', () => {
  const node = new FaultNode({ podCIDRs: [`${CIDR}.0/24`] });
  before(() => node.setup());
  after(async () => {
    node.setFault(undefined);
    await node.cleanup();
  });

  const gc = () => callAgent(controlSocketPath(node.socket), 'gc');
  const masterOf = async (veth: string) =>
    (await ipJson<Array<{ master?: string }>>(node.nodeNs, ['link', 'show', 'dev', veth]))[0]?.master ?? '';
  const guardSet = async (set: string) =>
    (
      await run('ip', [
        'netns',
        'exec',
        node.nodeNs,
        'nft',
        'list',
        'set',
        'bridge',
        'podwire_pod_guard',
        set,
      ])
    ).stdout;
  const pingGateway = async (ns: string, from?: string) =>
    (
      await run('ip', [
        'netns',
        'exec',
        ns,
        'ping',
        '-c',
        '2',
        '-i',
        '0.2',
        '-W',
        '1',
        ...(from ? ['-I', from] : []),
        `${CIDR}.1`,
      ])
    ).code === 0;

  test('1: a pod ADDed during the sweep keeps its bridge port and its guards', async () => {
    const ns = await node.addPod('late');
    node.setFault({ id: 'late', op: 'store.list', nth: 1, when: 'hold-after' });
    const sweep = gc();
    try {
      await sleep(300); // the sweep has listed links and claims, and waits
      const add = await node.cni({ command: 'ADD', containerId: 'late-pod', netns: ns });
      assert.equal(add.code, 0, add.stdout);
    } finally {
      node.setFault(undefined);
    }
    await sweep;
    const veth = hostVethName('late-pod', 'eth0');
    assert.equal(await masterOf(veth), 'podwire0', 'still a port of the bridge');
    assert.match(await guardSet('pod_ports'), new RegExp(veth), 'still guarded');
    assert.ok(await pingGateway(ns), 'the pod reaches its gateway');
    assert.equal((await node.cni({ command: 'DEL', containerId: 'late-pod', netns: ns })).code, 0);
  });

  test('2: a pod DELeted and ADDed again during the sweep is guarded with its new address', async () => {
    const ns = await node.addPod('churn');
    const first = await node.cni({ command: 'ADD', containerId: 'churn', netns: ns });
    assert.equal(first.code, 0, first.stdout);
    node.setFault({ id: 'churn', op: 'store.list', nth: 1, when: 'hold-after' });
    const sweep = gc();
    let second: Awaited<ReturnType<FaultNode['cni']>>;
    try {
      await sleep(300);
      assert.equal((await node.cni({ command: 'DEL', containerId: 'churn', netns: ns })).code, 0);
      second = await node.cni({ command: 'ADD', containerId: 'churn', netns: ns });
      assert.equal(second.code, 0, second.stdout);
    } finally {
      node.setFault(undefined);
    }
    await sweep;
    const [oldIp] = resultIps(first);
    const [newIp] = resultIps(second);
    assert.notEqual(oldIp, newIp, 'the second ADD got another address (the first was just released)');
    const ip4 = await guardSet('pod_ip4');
    assert.match(ip4, new RegExp(`${newIp?.replace(/\./g, '\\.')}\\b`), 'guarded with its new address');
    assert.doesNotMatch(ip4, new RegExp(`${oldIp?.replace(/\./g, '\\.')}\\b`), 'not with the released one');
    assert.ok(await pingGateway(ns), 'the pod reaches its gateway from its own address');
    assert.equal((await node.cni({ command: 'DEL', containerId: 'churn', netns: ns })).code, 0);
  });
});
