/**
 * Crash safety (I4): the agent is SIGKILLed in the middle of a parallel burst of ADDs, then restarted.
 * After reconcile and the runtime's DEL of the calls that failed, no address is leaked or held twice,
 * and the pods that existed before the crash keep theirs and their connectivity.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../bed/exec.js';
import { addressesByInterface, settledHostVeths } from '../../bed/inspect.js';
import { resultIps, TestNode } from '../../bed/node.js';

const node = new TestNode({ podCIDRs: ['10.244.7.0/24'] });
before(() => node.setup());
after(() => node.cleanup());

const ips = resultIps;

test('SIGKILL mid-burst, restart: nothing leaked or duplicated, survivors keep their addresses', async (t) => {
  const survivors: Array<{ ns: string; id: string; ips: string[] }> = [];
  for (let i = 0; i < 3; i++) {
    const ns = await node.addPod(`s${i}`);
    const add = await node.cni({ command: 'ADD', containerId: `survivor-${i}`, netns: ns });
    assert.equal(add.code, 0, add.stdout);
    survivors.push({ ns, id: `survivor-${i}`, ips: ips(add) });
  }

  const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => node.addPod(`b${i}`)));
  const calls = burst.map((ns, i) => node.cni({ command: 'ADD', containerId: `burst-${i}`, netns: ns }));
  // Kill once a few of the burst are done, so that others are certainly in flight.
  const from = node.logs.length;
  while ((node.logs.slice(from).match(/"attachment added"/g) ?? []).length < 3) await sleep(1);
  await node.stopAgent('SIGKILL');
  const outcomes = await Promise.all(calls);
  const answered = outcomes.filter((o) => o.code === 0).length;
  t.diagnostic(`${answered} of ${burst.length} burst ADDs answered before the kill`);
  assert.ok(answered < burst.length, 'the kill came mid-burst');
  for (const o of outcomes) {
    if (o.code !== 0)
      assert.equal((o.json as { code?: number })?.code, 11, `a cut call answers "try again": ${o.stdout}`);
  }

  await node.startAgent();
  // The runtime retries DEL for every ADD that did not succeed.
  for (const [i, o] of outcomes.entries()) {
    if (o.code === 0) continue;
    const del = await node.cni({ command: 'DEL', containerId: `burst-${i}`, netns: burst[i] });
    assert.equal(del.code, 0, del.stdout);
  }

  const live = [
    ...survivors.map((s) => ({ id: s.id, ips: s.ips })),
    ...outcomes.flatMap((o, i) => (o.code === 0 ? [{ id: `burst-${i}`, ips: ips(o) }] : [])),
  ];
  const claims = node.claims();
  assert.deepEqual(
    claims.map((c) => `${c.containerId}=${c.ip}`).sort(),
    live.flatMap((l) => l.ips.map((ip) => `${l.id}=${ip}`)).sort(),
    'the store holds exactly the live pods',
  );
  assert.equal(new Set(claims.map((c) => c.ip)).size, claims.length, 'no address held twice');
  assert.equal(
    (await settledHostVeths(node.nodeNs, live.length)).length,
    live.length,
    'one host veth per live pod',
  );

  for (const s of survivors) {
    const have = await addressesByInterface(s.ns);
    assert.deepEqual(
      have.get('eth0')?.map((a) => a.split('/')[0]),
      s.ips,
    );
    const ping = await run('ip', ['netns', 'exec', s.ns, 'ping', '-c', '1', '-W', '2', '10.244.7.1']);
    assert.equal(ping.code, 0, `survivor ${s.id} reaches the gateway after the restart`);
  }

  // A new pod after the restart gets an address nobody holds.
  const fresh = await node.addPod('fresh');
  const add = await node.cni({ command: 'ADD', containerId: 'fresh', netns: fresh });
  assert.equal(add.code, 0, add.stdout);
  const held = new Set(live.flatMap((l) => l.ips));
  for (const ip of ips(add)) assert.ok(!held.has(ip), `${ip} was already held`);
});
