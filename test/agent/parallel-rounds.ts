/**
 * The parallel-creation reproduction (docs/architecture.md, failure 1), shared by every datapath: `pods` ADDed in
 * parallel through the relay, then DELeted in parallel, for `rounds` rounds. After every ADD burst each
 * pod holds exactly its own addresses on eth0 and none is on the node; after every round the agent's
 * descriptor count is back at its baseline (I2); at the end no host veth and no allocation remain.
 */
import assert from 'node:assert/strict';
import { addressesByInterface, settledHostVeths } from '../../bed/inspect.js';
import { resultAddresses, type TestNode } from '../../bed/node.js';

export interface ParallelRounds {
  pods: readonly string[];
  rounds: number;
  /** Distinguishes container IDs between suites. */
  idPrefix: string;
  /** Datapath-specific checks while the pods exist (e.g. OVS ports and flows). */
  afterAdd?: (round: number) => Promise<void>;
  /** Datapath-specific checks that nothing is left at the end. */
  atEnd?: () => Promise<void>;
}

async function round(node: TestNode, o: ParallelRounds, r: number): Promise<void> {
  const ids = o.pods.map((_, i) => `${o.idPrefix}${r}-pod${i}`);
  const started = performance.now();
  const adds = await Promise.all(
    o.pods.map((ns, i) => node.cni({ command: 'ADD', containerId: ids[i], netns: ns })),
  );
  const addMs = performance.now() - started;
  const nodeAddrs = new Set(
    [...(await addressesByInterface(node.nodeNs)).values()].flat().map((a) => a.split('/')[0]),
  );
  for (const [i, add] of adds.entries()) {
    assert.equal(add.code, 0, `round ${r} pod ${i}: ${add.stdout}`);
    const reported = resultAddresses(add).sort();
    const have = await addressesByInterface(o.pods[i] as string);
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
  await o.afterAdd?.(r);

  const delStarted = performance.now();
  const dels = await Promise.all(
    o.pods.map((ns, i) => node.cni({ command: 'DEL', containerId: ids[i], netns: ns })),
  );
  const delMs = performance.now() - delStarted;
  for (const [i, del] of dels.entries()) assert.equal(del.code, 0, `round ${r} DEL ${i}: ${del.stdout}`);
  process.stdout.write(
    `# round ${r}: ${o.pods.length} ADDs in ${addMs.toFixed(0)} ms, DELs in ${delMs.toFixed(0)} ms\n`,
  );
}

export async function runParallelRounds(node: TestNode, o: ParallelRounds): Promise<void> {
  await round(node, o, 0); // warm-up: Node opens some descriptors lazily on first use
  const baseline = (await node.settleFds(-1, 200)).length;
  for (let r = 1; r <= o.rounds; r++) {
    await round(node, o, r);
    const fds = await node.settleFds(baseline);
    assert.equal(
      fds.length,
      baseline,
      `round ${r}: agent descriptors back at baseline ${baseline}: ${fds.join(', ')}`,
    );
  }
  assert.deepEqual(await settledHostVeths(node.nodeNs, 0), [], 'no host veth left');
  assert.deepEqual(node.claims(), [], 'no allocation left');
  await o.atEnd?.();
}
