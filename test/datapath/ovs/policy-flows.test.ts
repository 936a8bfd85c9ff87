/**
 * policy-flows.ts without a switch: shared clause matches become one flow with every conjunction,
 * an unchanged rule keeps its flows when another rule changes, ids of what is gone are reused, and
 * bad input throws. (What the flows do is policy.test.ts's, on a real bridge.)
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

test('two pods allowing the same port share one clause flow with both conjunctions', () => {
  const { flows } = policyFlows(
    NODE,
    [pod('a', '10.244.1.2', [web]), pod('b', '10.244.1.3', [web])],
    new ConjunctionIds(),
  );
  const port = flows.filter((f) => f.includes('tcp,tp_dst=80 '));
  assert.equal(port.length, 1, port.join('\n'));
  assert.match(port[0] as string, /actions=conjunction\(\d+,3\/3\),conjunction\(\d+,3\/3\)$/);
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
    return flows.filter((f) => f.includes(`conj_id=${id} `) || f.includes(`conjunction(${id},`));
  };
  assert.equal(webFlows(first).length, 4, webFlows(first).join('\n'));
  assert.deepEqual(webFlows(second), webFlows(first));
  const third = policyFlows(NODE, [pod('a', '10.244.1.2', [other(83)])], ids).flows;
  assert.ok(!third.some((f) => f.includes('10.0.0.0/8')));
});

test('a pod given twice throws before anything is built', () => {
  assert.throws(
    () => policyFlows(NODE, [pod('a', '10.244.1.2', []), pod('a', '10.244.1.2', [])], new ConjunctionIds()),
    /given twice/,
  );
});
