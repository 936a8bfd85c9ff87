/**
 * `podwire gc` (reconcile while serving) and CNI GC never cut into calls in flight: an ADD holds its
 * claim before its veth exists, and a sweep that ran in that window would release a live pod's address.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { run } from '../../bed/exec.js';
import { hostVeths, settledHostVeths } from '../../bed/inspect.js';
import { ROOT, resultIps, TestNode } from '../../bed/node.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import { callAgent } from '../../src/cli/control-client.js';

const node = new TestNode({ podCIDRs: ['10.244.19.0/24'] });
before(() => node.setup());
after(() => node.cleanup());

test('podwire gc during a burst of 20 ADDs releases nothing that a pod holds', async () => {
  const pods = await Promise.all(Array.from({ length: 20 }, (_, i) => node.addPod(`g${i}`)));
  const adds = Promise.all(
    pods.map((ns, i) => node.cni({ command: 'ADD', containerId: `gc-race-${i}`, netns: ns })),
  );
  // Reconcile over the control socket back to back for as long as the ADDs run.
  let done = false;
  let sweeps = 0;
  const sweeping = (async () => {
    while (!done) {
      await callAgent(controlSocketPath(node.socket), 'gc');
      sweeps++;
    }
  })();
  const outcomes = await adds;
  done = true;
  await sweeping;
  assert.ok(sweeps > 3, `${sweeps} sweeps ran during the burst`);
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
