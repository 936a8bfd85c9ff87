/**
 * Agent restarts with pods running on OVS: the bridge, ports and flows belong to OVS, not to the
 * agent, and a restarted agent rebuilds the wanted flow table from OVSDB and changes only what
 * differs. So a continuous ping between two pods loses nothing across a SIGTERM and a SIGKILL
 * restart, the flow table after reconcile is the one before (flows keep their age and counters),
 * and the port of a pod that went away while the agent was down is removed with its flows.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { must } from '../../../bed/exec.js';
import { resultIps, TestNode } from '../../../bed/node.js';
import { cookieText, podCookie } from '../../../src/datapath/ovs/pipeline.js';
import { flowAges, flowTable, hostVethOf, ovsPorts, podFlowsOf } from './ovs-node.js';

interface Pod {
  ns: string;
  ips: string[];
  veth: string;
}

const node = new TestNode({ datapath: 'ovs', podCIDRs: ['10.244.9.0/24', 'fd00:10:244:9::/64'] });
const pods = new Map<string, Pod>();

before(async () => {
  await node.setup();
  for (const id of ['a', 'b', 'gone']) {
    const ns = await node.addPod(id);
    const add = await node.cni({ command: 'ADD', containerId: id, netns: ns });
    assert.equal(add.code, 0, add.stdout);
    const veth = hostVethOf(add);
    pods.set(id, { ns, ips: resultIps(add), veth });
  }
});
after(() => node.cleanup());

/**
 * Pings every 20 ms for about `seconds`; resolves with ping's summary line. A count, not a deadline,
 * ends it: with `-w` alone the reply to the last request sent before the deadline is counted lost when
 * the machine is busy (seen in CI: 209 sent, 208 received). `-w` stays as a generous bound.
 */
function continuousPing(fromNs: string, to: string, seconds: number): Promise<string> {
  const count = String(seconds * 50);
  const args = ['netns', 'exec', fromNs, 'ping', '-i', '0.02', '-c', count, '-w', String(seconds + 20), to];
  const child = spawn('ip', args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  return new Promise((res) =>
    child.once('exit', () => res(out.split('\n').find((l) => l.includes('packet loss')) ?? out)),
  );
}

test('continuous ping loses nothing across agent restarts; the flow table is unchanged', async () => {
  const a = pods.get('a') as Pod;
  const b = pods.get('b') as Pod;
  const gone = pods.get('gone') as Pod;
  const goneCookie = `cookie=${cookieText(podCookie(gone.veth))},`;
  const before = await flowTable(node);
  assert.ok(
    before.some((l) => l.includes(goneCookie)),
    'the pod that will go away has flows',
  );
  const agesBefore = await flowAges(node, a.veth);
  const t0 = performance.now();

  const v4 = continuousPing(a.ns, b.ips[0] as string, 5);
  const v6 = continuousPing(a.ns, b.ips[1] as string, 5);
  await sleep(500);
  assert.equal(await node.stopAgent('SIGTERM'), 0);
  // While the agent is down, the pod "gone" disappears: its runtime removed the netns and the veth.
  await must('ip', ['-n', node.nodeNs, 'link', 'del', gone.veth]);
  await node.ns.delete(gone.ns);
  await node.startAgent();
  await sleep(500);
  await node.stopAgent('SIGKILL');
  await node.startAgent();
  const [sum4, sum6] = await Promise.all([v4, v6]);
  assert.match(sum4, / 0% packet loss/, `IPv4: ${sum4}`);
  assert.match(sum6, / 0% packet loss/, `IPv6: ${sum6}`);

  assert.deepEqual(
    await flowTable(node),
    before.filter((l) => !l.includes(goneCookie)),
    'flow table unchanged',
  );
  const elapsed = (performance.now() - t0) / 1000;
  const agesAfter = await flowAges(node, a.veth);
  assert.deepEqual([...agesAfter.keys()].sort(), [...agesBefore.keys()].sort());
  for (const [key, was] of agesBefore) {
    const now = agesAfter.get(key) as { age: number; packets: number };
    assert.ok(now.age >= was.age + elapsed - 1, `flow kept its age (${was.age} -> ${now.age}): ${key}`);
    assert.ok(now.packets >= was.packets, `flow kept its counter: ${key}`);
  }
  assert.ok(!(await ovsPorts(node)).includes(gone.veth), 'the port of the pod that went away is removed');
  assert.deepEqual(await podFlowsOf(node, gone.veth), [], 'and its flows');
  assert.equal(node.claims().filter((c) => c.containerId === 'gone').length, 0, 'and its addresses');
  assert.match(node.logs, /"msg":"reconciled".*"kept":2,"released":1/);
});
