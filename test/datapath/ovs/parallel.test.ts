/**
 * The parallel-creation reproduction (docs/architecture.md, failure 1) on the OVS datapath: 20 pods ADDed in
 * parallel through the relay, then DELeted in parallel, for PODWIRE_OVS_ROUNDS rounds (5 here; the
 * Linux-bridge run does 20). After every ADD burst each pod holds exactly its own addresses and has
 * its OVS port and flows; after every round the agent's descriptor count is back at its baseline
 * (I2: one OVSDB and one OpenFlow connection, shared by every call); at the end no host
 * veth, no allocation, no pod port and no pod flow remain.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TestNode } from '../../../bed/node.js';
import { runParallelRounds } from '../../agent/parallel-rounds.js';
import { allPodFlows, ovsPorts } from './ovs-node.js';

const ROUNDS = Number(process.env.PODWIRE_OVS_ROUNDS ?? 5);
const PODS = 20;

const node = new TestNode({ datapath: 'ovs', podCIDRs: ['10.244.7.0/24', 'fd00:10:244:7::/64'] });
const pods: string[] = [];
before(async () => {
  await node.setup();
  for (let i = 0; i < PODS; i++) pods.push(await node.addPod(`p${i}`));
});
after(() => node.cleanup());

test(`OVS: ${PODS} pods in parallel, ${ROUNDS} rounds: addresses in the right place, descriptors at baseline`, () =>
  runParallelRounds(node, {
    pods,
    rounds: ROUNDS,
    idPrefix: 'ovs-round',
    afterAdd: async (r) => {
      assert.equal((await ovsPorts(node)).length, PODS + 1, `round ${r}: ${PODS} pod ports and the gateway`);
      const cookies = new Set((await allPodFlows(node)).map((f) => f.cookie));
      assert.equal(cookies.size, PODS, `round ${r}: every pod has its flows`);
    },
    atEnd: async () => {
      assert.deepEqual(await ovsPorts(node), ['podwire-gw0'], 'no pod port left');
      assert.deepEqual(await allPodFlows(node), [], 'no pod flow left');
    },
  }));
