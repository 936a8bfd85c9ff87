/**
 * OVS: the switch's part of ADD and DEL overlaps the agent's own (docs/decisions/0025-native-openflow.md).
 * The agent runs with the fault seam (test/agent/fault/), which holds one datapath call on cue.
 *
 * ADD: ovs-vswitchd opens the pod's port while the agent configures the pod side (`Datapath.openPort`).
 * With `datapath.attachPort` (the call ADD makes once the pod side is done) held, the port's row and
 * flows must already be in the switch, and the host end still down (nothing passes before
 * attachPort). Depends on the `datapath.openPort(port)` call in src/agent/cni/cmd-add.ts, made before
 * the pod side: without it the switch hears of the port only in attachPort.
 *
 * DEL: answers once the pod's flows are gone; the port's row goes after the answer
 * (`Datapath.removeIsolatedPort`, from src/agent/cni/cmd-del.ts). With that call held, DEL has
 * answered, the flows are gone and the row is still there; a switch restart meanwhile must not put the
 * pod's flows back (its address may already be another pod's). Depends on `isolatePort` in
 * src/datapath/ovs/ovs-datapath.ts deleting only the flows, and on its `this.#pendingRemovals.add`,
 * which keeps the replay from deriving the isolated pod's flows from its row.
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

reportOvsSkip('OVS port work overlapped with the agent');
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

  test('DEL answers with the flows gone and the row still there; a switch restart meanwhile does not bring the flows back', async () => {
    const call = { containerId: 'isolate-port', ifname: 'eth0' };
    const host = hostVethName(call.containerId, call.ifname);
    const ovs = node.ovs;
    assert.ok(ovs);
    const bridge = node.options.bridge;
    const flowsOf = async () =>
      (await ovs.ofctl('dump-flows', bridge, `cookie=${cookieText(podCookie(host))}/-1`))
        .split('\n')
        .filter((l) => l.includes('actions='));
    const rowThere = async () => (await ovs.vsctl('list-ports', bridge)).split('\n').includes(host);
    const added = await node.cni({ command: 'ADD', netns: pod, ...call });
    assert.equal(added.code, 0, added.stdout);
    assert.ok((await flowsOf()).length > 0, 'the pod has flows');

    node.setFault({ id: 'isolate-port', op: 'datapath.removeIsolatedPort', nth: 1, when: 'hold' });
    try {
      const del = await node.cni({ command: 'DEL', netns: pod, ...call });
      assert.equal(del.code, 0, del.stdout);
      assert.deepEqual(await flowsOf(), [], 'no flow of the pod once DEL answered');
      assert.ok(await rowThere(), 'the row is still there while its removal is held');

      const logFrom = node.logs.length;
      await ovs.restartVswitchd();
      await until('the agent replayed the switch state', 10_000, async () =>
        node.logs.includes('OVS switch state replayed', logFrom),
      );
      assert.deepEqual(await flowsOf(), [], 'the replay left the isolated pod out');
    } finally {
      node.setFault(undefined);
    }
    await until('the row is removed once released', 10_000, async () => !(await rowThere()));
    await settledHostVeths(node.nodeNs, 0);
    assert.deepEqual(await stateOf(node, pod), baseline, 'the node after DEL');
  });
});
