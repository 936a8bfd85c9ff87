/**
 * `podwire gc` (reconcile while serving) and CNI GC never cut into calls in flight: an ADD holds its
 * claim before its veth exists, and a sweep that ran in that window would release a live pod's address.
 * The test drives the interleaving instead of hoping for it: every ADD of the burst is held right after
 * its claim (fault/fault-plan.ts, `hold-after`) while sweeps run, then released while sweeps go on, so
 * the window is covered on any machine, loaded or not.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../bed/exec.js';
import { hostVeths, settledHostVeths } from '../../bed/inspect.js';
import { ROOT, resultIps } from '../../bed/node.js';
import type { ReconcileReport } from '../../src/agent/cni/reconcile.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import { callAgent } from '../../src/cli/control-client.js';
import { FaultNode } from './fault/fault-node.js';

const node = new FaultNode({ podCIDRs: ['10.244.19.0/24'] });
before(() => node.setup());
after(() => node.cleanup());

test('podwire gc during a burst of 20 ADDs releases nothing that a pod holds', async () => {
  const pods = await Promise.all(Array.from({ length: 20 }, (_, i) => node.addPod(`g${i}`)));
  // Every ADD of the burst stops right after its claim, before its veth exists.
  node.setFault(
    Array.from({ length: 20 }, (_, i) => ({
      id: 'burst',
      op: 'store.claim',
      nth: i + 1,
      when: 'hold-after' as const,
    })),
  );
  const adds = Promise.all(
    pods.map((ns, i) => node.cni({ command: 'ADD', containerId: `gc-race-${i}`, netns: ns })),
  );
  const sweep = () => callAgent(controlSocketPath(node.socket), 'gc') as Promise<ReconcileReport>;
  let done = false;
  let sweeping: Promise<void> | undefined;
  try {
    for (const deadline = Date.now() + 30_000; node.claims().length < 20; await sleep(20)) {
      assert.ok(Date.now() < deadline, `all 20 ADDs claimed (${node.claims().length})`);
    }
    assert.deepEqual(await hostVeths(node.nodeNs), [], 'every ADD is held in the window: claimed, no veth');
    for (let i = 0; i < 3; i++)
      assert.deepEqual((await sweep()).released, [], 'a sweep in the window released nothing');
    // Then sweeps back to back while the held ADDs go on.
    sweeping = (async () => {
      while (!done) {
        assert.deepEqual((await sweep()).released, []);
      }
    })();
  } finally {
    node.setFault(undefined);
  }
  const outcomes = await adds;
  done = true;
  await sweeping;
  assert.equal((await run(`${ROOT}/bin/podwire`, ['gc', '--config', node.configPath])).code, 0);
  for (const o of outcomes) assert.equal(o.code, 0, o.stdout);
  const claimed = new Set(node.claims().map((c) => c.ip));
  for (const o of outcomes) for (const ip of resultIps(o)) assert.ok(claimed.has(ip), `${ip} still claimed`);
  assert.equal((await hostVeths(node.nodeNs)).length, 20, 'every pod keeps its veth');
  // And a CNI GC naming them all valid, while DELs run, keeps the others consistent.
  const valid = outcomes.slice(10).map((_, i) => ({ containerID: `gc-race-${i + 10}`, ifname: 'eth0' }));
  const dels = Promise.all(
    pods.slice(0, 10).map((ns, i) => node.cni({ command: 'DEL', containerId: `gc-race-${i}`, netns: ns })),
  );
  const gc = await node.cni({ command: 'GC', conf: { 'cni.dev/valid-attachments': valid } });
  assert.equal(gc.code, 0, gc.stdout);
  for (const d of await dels) assert.equal(d.code, 0, d.stdout);
  assert.equal(node.claims().length, 10);
  assert.equal((await settledHostVeths(node.nodeNs, 10)).length, 10);
});
