/**
 * The parallel-creation reproduction (DESIGN.md, failure 1): 20 pods ADDed in parallel through the
 * relay, then DELeted in parallel, for PODWIRE_ROUNDS rounds (20 here; `npm run soak` runs 100).
 * After every round: each pod holds exactly its own addresses on eth0 in its own netns, no pod address
 * is on any interface of the node, the agent's descriptor count is back at its baseline (I2), and at
 * the end no host veth and no allocation remain.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { addressesByInterface, hostVeths } from '../testbed/inspect.js';
import { resultAddresses, TestNode } from '../testbed/node.js';

const ROUNDS = Number(process.env.PODWIRE_ROUNDS ?? 20);
const PODS = 20;

const node = new TestNode();
const pods: string[] = [];
before(async () => {
  await node.setup();
  for (let i = 0; i < PODS; i++) pods.push(await node.addPod(`p${i}`));
});
after(() => node.cleanup());

async function round(r: number): Promise<void> {
  const ids = pods.map((_, i) => `round${r}-pod${i}`);
  const adds = await Promise.all(
    pods.map((ns, i) => node.cni({ command: 'ADD', containerId: ids[i], netns: ns })),
  );
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
    for (const [ifname, addrs] of have)
      if (ifname !== 'eth0') assert.deepEqual(addrs, [], `${ifname} has no address`);
    for (const a of reported) assert.ok(!nodeAddrs.has(a.split('/')[0]), `pod address ${a} on the node`);
  }
  const all = adds.flatMap(resultAddresses);
  assert.equal(new Set(all).size, all.length, 'no address handed out twice');

  const dels = await Promise.all(
    pods.map((ns, i) => node.cni({ command: 'DEL', containerId: ids[i], netns: ns })),
  );
  for (const [i, del] of dels.entries()) assert.equal(del.code, 0, `round ${r} DEL ${i}: ${del.stdout}`);
}

test(`${PODS} pods in parallel, ${ROUNDS} rounds: addresses in the right place, descriptors at baseline`, async () => {
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
});
