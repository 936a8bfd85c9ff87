/**
 * The parallel-creation reproduction (DESIGN.md, failure 1) on the OVS datapath: 20 pods ADDed in
 * parallel through the relay, then DELeted in parallel, for PODWIRE_OVS_ROUNDS rounds (5 here; the
 * Linux-bridge run does 20). After every ADD burst each pod holds exactly its own addresses and has
 * its OVS port and flows; after every round the agent's descriptor count is back at its baseline
 * (I2: OVSDB connection shared, one short-lived ovs-ofctl per pod operation); at the end no host
 * veth, no allocation, no pod port and no pod flow remain.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { addressesByInterface, hostVeths } from '../../testbed/inspect.js';
import { resultAddresses, TestNode } from '../../testbed/node.js';
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

async function round(r: number): Promise<void> {
  const ids = pods.map((_, i) => `ovs-round${r}-pod${i}`);
  const started = performance.now();
  const adds = await Promise.all(
    pods.map((ns, i) => node.cni({ command: 'ADD', containerId: ids[i], netns: ns })),
  );
  const addMs = performance.now() - started;
  const nodeAddrs = new Set(
    [...(await addressesByInterface(node.nodeNs)).values()].flat().map((a) => a.split('/')[0]),
  );
  for (const [i, add] of adds.entries()) {
    assert.equal(add.code, 0, `round ${r} pod ${i}: ${add.stdout}`);
    const reported = resultAddresses(add).sort();
    const have = await addressesByInterface(pods[i] as string);
    assert.deepEqual(
      have.get('eth0')?.sort(),
      reported,
      `round ${r} pod ${i} holds exactly its own addresses`,
    );
    for (const a of reported) assert.ok(!nodeAddrs.has(a.split('/')[0]), `pod address ${a} on the node`);
  }
  const all = adds.flatMap(resultAddresses);
  assert.equal(new Set(all).size, all.length, 'no address handed out twice');
  assert.equal((await ovsPorts(node)).length, PODS + 1, `round ${r}: ${PODS} pod ports and the gateway`);
  const cookies = new Set((await allPodFlows(node)).map((f) => f.cookie));
  assert.equal(cookies.size, PODS, `round ${r}: every pod has its flows`);

  const delStarted = performance.now();
  const dels = await Promise.all(
    pods.map((ns, i) => node.cni({ command: 'DEL', containerId: ids[i], netns: ns })),
  );
  const delMs = performance.now() - delStarted;
  for (const [i, del] of dels.entries()) assert.equal(del.code, 0, `round ${r} DEL ${i}: ${del.stdout}`);
  process.stdout.write(
    `# round ${r}: ${PODS} ADDs in ${addMs.toFixed(0)} ms, ${PODS} DELs in ${delMs.toFixed(0)} ms\n`,
  );
}

test(`OVS: ${PODS} pods in parallel, ${ROUNDS} rounds: addresses in the right place, descriptors at baseline`, async () => {
  await round(0); // warm-up: Node opens some descriptors lazily on first use
  const baseline = (await node.settleFds(-1, 200)).length;
  for (let r = 1; r <= ROUNDS; r++) {
    await round(r);
    const fds = await node.settleFds(baseline);
    assert.equal(
      fds.length,
      baseline,
      `round ${r}: agent descriptors back at baseline ${baseline}: ${fds.join(', ')}`,
    );
  }
  assert.deepEqual(await hostVeths(node.nodeNs), [], 'no host veth left');
  assert.deepEqual(node.claims(), [], 'no allocation left');
  assert.deepEqual(await ovsPorts(node), ['podwire-gw0'], 'no pod port left');
  assert.deepEqual(await allPodFlows(node), [], 'no pod flow left');
});
