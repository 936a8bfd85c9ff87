/**
 * ADD rollback under injected faults (issue 11, point 4). The agent runs with a fault-injecting
 * datapath and IPAM store (test/agent/fault/); each case fails one call ADD makes through those
 * seams, before it reaches the real object or after it took effect. For every case:
 * - the ADD answers a CNI error naming the injected fault;
 * - nothing is left: no IPAM claim (state dir files, the agent's view over the control socket), no
 *   host veth, no bridge port, no pod interface, no OVS port, Interface row or flow, no change to the
 *   node's nftables ruleset (the guards) — the node looks exactly as before the ADD;
 * - the next ADD of the same pod (same container ID, netns, ifname) succeeds, the pod reaches its
 *   gateway, and DEL leaves the node as it was.
 * When an undo step fails as well (a second fault), the ADD still answers an error and the DEL a
 * runtime sends after a failed ADD removes what is left.
 * Runs on the Linux bridge and, when ovs-vswitchd is installed, on OVS (userspace datapath).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { settledHostVeths } from '../../bed/inspect.js';
import { resultIps } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { reportOvsSkip } from '../datapath/ovs-skip.js';
import { FaultNode } from './fault/fault-node.js';
import { type Fault, INJECTED } from './fault/fault-plan.js';
import { type NodeState, reaches, stateOf } from './fault/node-state.js';

const V4 = '10.244.31.0/24';
const V6 = 'fd00:10:244:31::/64';
const GATEWAY4 = '10.244.31.1';
const GATEWAY6 = 'fd00:10:244:31::1';

/** Every call ADD makes through the two seams, in the order it makes them (dual stack: two claims). */
const FAULTS: Array<Omit<Fault, 'id'>> = [
  { op: 'store.claim', nth: 1, when: 'before' },
  { op: 'store.claim', nth: 1, when: 'after' },
  { op: 'store.claim', nth: 2, when: 'before' },
  { op: 'store.claim', nth: 2, when: 'after' },
  { op: 'datapath.attachPort', nth: 1, when: 'before' },
  { op: 'datapath.attachPort', nth: 1, when: 'after' },
];

/**
 * OVS only: the port's row and flows go out before the pod side (`Datapath.openPort`); a failure of
 * the pod side or of anything after it is undone from there (the route case below exercises that).
 */
const OVS_FAULTS: Array<Omit<Fault, 'id'>> = [
  { op: 'datapath.openPort', nth: 1, when: 'before' },
  { op: 'datapath.openPort', nth: 1, when: 'after' },
];

/** A step fails after taking effect, then its undo (or another undo) fails too. */
const DOUBLE: Array<{
  name: string;
  faults: Array<Omit<Fault, 'id'>>;
  /** What the failed undo leaves until the DEL (the Linux bridge's port goes with its veth). */
  leaves: (datapath: string) => keyof NodeState | undefined;
}> = [
  {
    name: 'attachPort fails after it took effect, then its undo detachPort fails',
    faults: [
      { op: 'datapath.attachPort', nth: 1, when: 'after' },
      { op: 'datapath.detachPort', nth: 1, when: 'before' },
    ],
    leaves: (datapath) => (datapath === 'ovs' ? 'flows' : undefined),
  },
  {
    name: 'attachPort fails, then the rollback release of the IPv4 claim fails',
    faults: [
      { op: 'datapath.attachPort', nth: 1, when: 'before' },
      { op: 'store.release', nth: 1, when: 'before' },
    ],
    leaves: () => 'claimFiles',
  },
];

const datapaths: Array<'linux-bridge' | 'ovs'> = [
  'linux-bridge',
  ...(ovsAvailable() ? ['ovs' as const] : []),
];

reportOvsSkip('ADD rollback');
for (const datapath of datapaths) {
  describe(`ADD rollback with injected faults (${datapath})`, () => {
    const node = new FaultNode({ datapath, podCIDRs: [V4, V6] });
    let pod = '';
    let baseline: NodeState;
    before(async () => {
      await node.setup();
      pod = await node.addPod('rb');
      baseline = await stateOf(node, pod);
      assert.deepEqual(baseline.podLinks, ['lo']);
      assert.deepEqual(baseline.claimFiles, []);
    });
    after(() => node.cleanup());

    const call = { containerId: `rollback-${datapath}`, ifname: 'eth0' };
    let seq = 0;
    for (const f of [...FAULTS, ...(datapath === 'ovs' ? OVS_FAULTS : [])]) {
      test(`${f.op} #${f.nth} fails ${f.when}: CNI error, nothing left, the next ADD works`, async () => {
        seq += 1;
        node.setFault({ id: `${datapath}-${seq}`, ...f });
        const failed = await node.cni({ command: 'ADD', netns: pod, ...call });
        node.setFault(undefined);
        assert.equal(failed.code, 1, `ADD must fail: ${failed.stdout}`);
        const err = failed.json as { code: number; msg: string };
        assert.equal(typeof err.code, 'number', failed.stdout);
        // The spec's range for plugin errors: ERR_STORE 107, ERR_DATAPATH 106 (cni/errors.ts).
        assert.equal(err.code, f.op.startsWith('store.') ? 107 : 106, failed.stdout);
        assert.match(err.msg, new RegExp(`${INJECTED}: ${f.op.replace('.', '\\.')} \\(`));
        await settledHostVeths(node.nodeNs, 0);
        assert.deepEqual(await stateOf(node, pod), baseline, 'the node after the failed ADD');

        const ok = await node.cni({ command: 'ADD', netns: pod, ...call });
        assert.equal(ok.code, 0, `the next ADD of the same pod: ${ok.stdout}`);
        const ips = resultIps(ok);
        assert.equal(ips.length, 2, ok.stdout);
        for (const gw of [GATEWAY4, GATEWAY6]) assert.ok(await reaches(pod, gw), `pod reaches ${gw}`);
        const del = await node.cni({ command: 'DEL', netns: pod, ...call });
        assert.equal(del.code, 0, del.stdout);
        await settledHostVeths(node.nodeNs, 0);
        assert.deepEqual(await stateOf(node, pod), baseline, 'the node after DEL');
      });
    }

    // Not injected: the kernel refuses a route whose gw the pod cannot reach. Depends on the
    // ENETUNREACH check in src/agent/cni/pod-interface.ts (configurePodInterface).
    test('a route whose gw the pod cannot reach: CNI error 7 naming it, nothing left', async () => {
      const failed = await node.cni({
        command: 'ADD',
        netns: pod,
        ...call,
        conf: { routes: [{ dst: '198.51.100.0/24', gw: '192.0.2.1' }] },
      });
      assert.equal(failed.code, 1, failed.stdout);
      const err = failed.json as { code: number; msg: string };
      assert.equal(err.code, 7, failed.stdout);
      assert.match(err.msg, /routes: gw 192\.0\.2\.1 of the route to 198\.51\.100\.0\/24 is not reachable/);
      await settledHostVeths(node.nodeNs, 0);
      assert.deepEqual(await stateOf(node, pod), baseline, 'the node after the refused ADD');
    });

    for (const d of DOUBLE) {
      test(`${d.name}: CNI error; the runtime's DEL cleans up, the next ADD works`, async () => {
        seq += 1;
        node.setFault(d.faults.map((f) => ({ id: `${datapath}-${seq}`, ...f })));
        const logsFrom = node.logs.length;
        const failed = await node.cni({ command: 'ADD', netns: pod, ...call });
        node.setFault(undefined);
        assert.equal(failed.code, 1, `ADD must fail: ${failed.stdout}`);
        assert.match((failed.json as { msg: string }).msg, new RegExp(INJECTED));
        assert.ok(node.logs.includes('"undo step failed"', logsFrom), 'the failed undo is logged');
        const left = d.leaves(datapath);
        if (left !== undefined) {
          await settledHostVeths(node.nodeNs, 0);
          const state = await stateOf(node, pod);
          assert.notDeepEqual(state[left], baseline[left], `the failed undo left ${left} behind`);
        }
        const cleanup = await node.cni({ command: 'DEL', netns: pod, ...call });
        assert.equal(cleanup.code, 0, cleanup.stdout);
        await settledHostVeths(node.nodeNs, 0);
        assert.deepEqual(await stateOf(node, pod), baseline, 'the node after the failed ADD and its DEL');
        const ok = await node.cni({ command: 'ADD', netns: pod, ...call });
        assert.equal(ok.code, 0, `the next ADD of the same pod: ${ok.stdout}`);
        assert.ok(await reaches(pod, GATEWAY4), `pod reaches ${GATEWAY4}`);
        const del = await node.cni({ command: 'DEL', netns: pod, ...call });
        assert.equal(del.code, 0, del.stdout);
        await settledHostVeths(node.nodeNs, 0);
        assert.deepEqual(await stateOf(node, pod), baseline, 'the node after DEL');
      });
    }
  });
}
