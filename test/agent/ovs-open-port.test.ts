/**
 * OVS ADD: ovs-vswitchd opens the pod's port while the agent configures the pod side
 * (`Datapath.openPort`, docs/decisions/0025-native-openflow.md). The agent runs with the fault seam
 * (test/agent/fault/), which holds `datapath.attachPort`, the call ADD makes once the pod side is
 * done: by then the port's row and flows must be in the switch, and the host end still down (nothing
 * passes before attachPort). Depends on the `datapath.openPort(port)` call in
 * src/agent/cni/cmd-add.ts, made before the pod side: without it the switch hears of the port only
 * in attachPort, and nothing of it is there while attachPort is held.
 * A private OVS (userspace datapath), a real agent and relay, throwaway namespaces.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ipJson } from '../../bed/exec.js';
import { settledHostVeths } from '../../bed/inspect.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { hostVethName } from '../../src/agent/cni/host-veth.js';
import { cookieText, podCookie } from '../../src/datapath/ovs/pipeline.js';
import { reportOvsSkip } from '../datapath/ovs-skip.js';
import { FaultNode } from './fault/fault-node.js';
import { type NodeState, reaches, stateOf } from './fault/node-state.js';

const V4 = '10.244.33.0/24';
const GATEWAY4 = '10.244.33.1';

async function until(what: string, ms: number, fn: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(20);
  }
}

reportOvsSkip('OVS port opened during the pod side');
describe('OVS ADD: the switch opens the port while the pod side is configured', {
  skip: !ovsAvailable(),
}, () => {
  const node = new FaultNode({ datapath: 'ovs', podCIDRs: [V4] });
  let pod = '';
  let baseline: NodeState;
  before(async () => {
    await node.setup();
    pod = await node.addPod('op');
    baseline = await stateOf(node, pod);
  });
  after(() => node.cleanup());

  test('with attachPort held, the row and flows are in the switch and the host end is down', async () => {
    const call = { containerId: 'open-port', ifname: 'eth0' };
    const host = hostVethName(call.containerId, call.ifname);
    const ovs = node.ovs;
    assert.ok(ovs);
    node.setFault({ id: 'open-port', op: 'datapath.attachPort', nth: 1, when: 'hold' });
    const adding = node.cni({ command: 'ADD', netns: pod, ...call });
    try {
      // The pod side is done: its address is on.
      await until('the pod has its address', 10_000, async () => {
        const addrs = await ipJson<Array<{ addr_info: Array<{ family: string }> }>>(pod, [
          'addr',
          'show',
          'eth0',
        ]).catch(() => []);
        return addrs.some((a) => a.addr_info.some((i) => i.family === 'inet'));
      });
      await until('the port row is in OVSDB while attachPort is held', 5_000, async () =>
        (await ovs.vsctl('list-ports', node.options.bridge)).split('\n').includes(host),
      );
      await until("the pod's flows are in the switch while attachPort is held", 5_000, async () =>
        (
          await ovs.ofctl('dump-flows', node.options.bridge, `cookie=${cookieText(podCookie(host))}/-1`)
        ).includes('actions='),
      );
      const [link] = await ipJson<Array<{ flags: string[] }>>(node.nodeNs, ['link', 'show', host]);
      assert.ok(link && !link.flags.includes('UP'), `host end down until attachPort: ${link?.flags}`);
    } finally {
      node.setFault(undefined);
    }
    const added = await adding;
    assert.equal(added.code, 0, added.stdout);
    const [link] = await ipJson<Array<{ flags: string[] }>>(node.nodeNs, ['link', 'show', host]);
    assert.ok(link?.flags.includes('UP'), 'host end up after attachPort');
    assert.ok(await reaches(pod, GATEWAY4), `pod reaches ${GATEWAY4}`);
    const del = await node.cni({ command: 'DEL', netns: pod, ...call });
    assert.equal(del.code, 0, del.stdout);
    await settledHostVeths(node.nodeNs, 0);
    assert.deepEqual(await stateOf(node, pod), baseline, 'the node after DEL');
  });
});
