/**
 * policy-flows.ts without a switch: one conjunction per rule entry whatever the number of pods (the
 * pods its first clause, each counted on its own flow), shared clause matches one flow with every
 * conjunction, an unchanged rule keeps its flows when another rule changes, ids of what is gone are
 * reused, and bad input throws. (What the flows do is policy.test.ts's, on a real bridge.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConjunctionIds, policyFlows } from '../../../src/datapath/ovs/policy-flows.js';
import type { CompiledRule, PodPolicy } from '../../../src/policy/model.js';

const NODE = { gatewayOfport: 1, nodeIps: ['10.244.1.1'] };
const web: CompiledRule = {
  id: 'ns/p/ingress/0',
  entries: [{ peers: ['10.0.0.0/8'], ports: [{ protocol: 'TCP', first: 80, last: 80 }] }],
};
const other = (port: number): CompiledRule => ({
  id: 'ns/q/ingress/0',
  entries: [{ peers: 'any', ports: [{ protocol: 'TCP', first: port, last: port }] }],
});
const pod = (name: string, ip: string, rules: CompiledRule[]): PodPolicy => ({
  namespace: 'ns',
  name,
  ips: [ip],
  ingress: { policies: ['ns/p'], rules },
  egress: null,
});

test('two pods with the same rule share its conjunction: one action on the peer and port flows, each pod counted apart', () => {
  const { flows, counters } = policyFlows(
    NODE,
    [pod('a', '10.244.1.2', [web]), pod('b', '10.244.1.3', [web])],
    new ConjunctionIds(),
  );
  const port = flows.filter((f) => f.includes('tcp,tp_dst=80 '));
  assert.equal(port.length, 1, port.join('\n'));
  const id = /actions=conjunction\((\d+),3\/3\)$/.exec(port[0] as string)?.[1];
  assert.ok(id !== undefined, port[0]);
  assert.ok(
    flows.some((f) => f.includes('nw_src=10.0.0.0/8 ') && f.endsWith(`actions=conjunction(${id},2/3)`)),
  );
  for (const ip of ['10.244.1.2', '10.244.1.3']) {
    assert.ok(
      flows.some((f) => f.includes(`nw_dst=${ip} `) && f.endsWith(`actions=conjunction(${id},1/3)`)),
      ip,
    );
  }
  // Each pod's own flow after the conjunction, with its own cookie: the counters stay per pod.
  const counted = flows.filter((f) => f.includes(`conj_id=${id},`));
  assert.equal(counted.length, 2, counted.join('\n'));
  const cookies = counted.map((f) => BigInt(/cookie=(0x[0-9a-f]+)/.exec(f)?.[1] ?? '0'));
  assert.deepEqual(cookies.map((c) => counters.get(c)?.pod).sort(), ['ns/a', 'ns/b']);
});

test('a peer named by one rule for many pods carries one conjunction action, not one per pod', () => {
  const pods = Array.from({ length: 50 }, (_, i) => pod(`p${i}`, `10.244.1.${i + 2}`, [web]));
  const { flows } = policyFlows(NODE, pods, new ConjunctionIds());
  const peer = flows.find((f) => f.includes('nw_src=10.0.0.0/8 '));
  assert.equal((peer?.match(/conjunction\(/g) ?? []).length, 1, peer);
});

test("an unchanged rule keeps its flows when another rule changes; a gone rule's id is reused", () => {
  const ids = new ConjunctionIds();
  const first = policyFlows(NODE, [pod('a', '10.244.1.2', [web, other(81)])], ids).flows;
  const second = policyFlows(NODE, [pod('a', '10.244.1.2', [web, other(82)])], ids).flows;
  const webId = (flows: string[]) =>
    /conjunction\((\d+),2\/3\)/.exec(flows.find((f) => f.includes('nw_src=10.0.0.0/8')) ?? '')?.[1];
  const webFlows = (flows: string[]) => {
    const id = webId(flows);
    assert.ok(id !== undefined);
    return flows.filter((f) => f.includes(`conj_id=${id},`) || f.includes(`conjunction(${id},`));
  };
  assert.equal(webFlows(first).length, 4, webFlows(first).join('\n'));
  // The pod's address is clause 1 of both rules' conjunctions: that one flow's actions follow the
  // other rule; the web rule's own flows (its counting flow among them) stay as they were.
  const own = (flows: string[]) =>
    webFlows(flows).filter((f) => !/priority=100,.*nw_dst=10\.244\.1\.2 actions=/.test(f));
  assert.equal(own(first).length, 3);
  assert.deepEqual(own(second), own(first));
  assert.equal(webId(second), webId(first));
  assert.ok(
    webFlows(second).some((f) => f.includes(`nw_dst=10.244.1.2 actions=conjunction(${webId(first)},1/3)`)),
  );
  const third = policyFlows(NODE, [pod('a', '10.244.1.2', [other(83)])], ids).flows;
  assert.ok(!third.some((f) => f.includes('10.0.0.0/8')));
  // The web rule's id was freed by the third apply: the next new conjunction takes a freed id.
  const conjIds = (flows: string[]) =>
    new Set(flows.flatMap((f) => [...f.matchAll(/conjunction\((\d+),/g)].map((m) => m[1])));
  const fourth = policyFlows(NODE, [pod('a', '10.244.1.2', [other(84)])], ids).flows;
  const fresh = [...conjIds(fourth)].filter((id) => !conjIds(third).has(id));
  assert.equal(fresh.length, 1);
  assert.ok(
    conjIds(first).has(fresh[0] as string) || conjIds(second).has(fresh[0] as string),
    `id ${fresh[0]} reused`,
  );
});

test("a rule's peers change (a pod joins or leaves them): its conjunction keeps its id and each pod's counting flow", () => {
  const ids = new ConjunctionIds();
  const withPeers = (peers: string[]): CompiledRule => ({
    id: 'ns/p/ingress/0',
    entries: [{ peers, ports: [{ protocol: 'TCP', first: 80, last: 80 }] }],
  });
  const counting = (flows: string[]) => flows.filter((f) => f.includes('conj_id=')).sort();
  const before = policyFlows(NODE, [pod('a', '10.244.1.2', [withPeers(['10.9.0.1/32'])])], ids).flows;
  const after = policyFlows(
    NODE,
    [pod('a', '10.244.1.2', [withPeers(['10.9.0.1/32', '10.9.0.2/32'])])],
    ids,
  ).flows;
  assert.equal(counting(before).length, 1);
  assert.deepEqual(counting(after), counting(before));
  const id = /conj_id=(\d+),/.exec(counting(before)[0] as string)?.[1];
  assert.ok(after.some((f) => f.includes('nw_src=10.9.0.2 ') && f.endsWith(`conjunction(${id},2/3)`)));
});

test('two pods with one rule id but different peers (not what the compiler gives) get a conjunction each', () => {
  const a: CompiledRule = { id: 'ns/p/ingress/0', entries: [{ peers: ['10.9.0.1/32'], ports: 'any' }] };
  const b: CompiledRule = { id: 'ns/p/ingress/0', entries: [{ peers: ['10.9.0.2/32'], ports: 'any' }] };
  const { flows } = policyFlows(
    NODE,
    [pod('a', '10.244.1.2', [a]), pod('b', '10.244.1.3', [b])],
    new ConjunctionIds(),
  );
  const conjOf = (match: string) =>
    /conjunction\((\d+),/.exec(
      flows.find((f) => f.includes(`${match} `) && f.includes('conjunction(')) ?? '',
    )?.[1];
  assert.notEqual(conjOf('nw_src=10.9.0.1'), conjOf('nw_src=10.9.0.2'));
  assert.equal(conjOf('nw_src=10.9.0.1'), conjOf('nw_dst=10.244.1.2'));
  assert.equal(conjOf('nw_src=10.9.0.2'), conjOf('nw_dst=10.244.1.3'));
});

test('a pod given twice throws before anything is built', () => {
  assert.throws(
    () => policyFlows(NODE, [pod('a', '10.244.1.2', []), pod('a', '10.244.1.2', [])], new ConjunctionIds()),
    /given twice/,
  );
});
