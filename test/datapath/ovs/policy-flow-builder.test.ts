/**
 * PolicyFlowBuilder against policyFlows, without a switch: random worlds compiled by the incremental
 * compiler (as the agent does: an unchanged pod is the previous object), stepped a few times by the
 * compiler tests' steps (objects kept, copied, changed, replaced, removed, added; addresses move, so
 * pods come to share addresses), and after each step the builder's flows equal `policyFlows`' for the
 * same pods and the same conjunction ids, and its change (removes, then adds) turns the previous
 * flows into them. Replay a failure with PODWIRE_POLICY_SEED=SEED.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { PolicyFlowBuilder } from '../../../src/datapath/ovs/policy-flow-builder.js';
import { ConjunctionIds, policyFlows } from '../../../src/datapath/ovs/policy-flows.js';
import { IncrementalCompiler } from '../../../src/policy/incremental-compile.js';
import type { World } from '../../policy/policy-oracle.js';
import { choices, NODE, port, step, world } from '../../policy/policy-world-arbitrary.js';

const sorted = (xs: Iterable<string>) => [...xs].sort();

test('after every step, the builder holds what policyFlows gives, and its change gets there (300 runs)', () => {
  const seed = process.env.PODWIRE_POLICY_SEED;
  const totals = { builds: 0, rebuilt: 0, changes: 0 };
  fc.assert(
    fc.property(
      world(port, true),
      fc.array(fc.tuple(world(port, true), choices, fc.constantFrom(1, 1, 1, 7)), {
        minLength: 1,
        maxLength: 6,
      }),
      (first, steps) => {
        const compiler = new IncrementalCompiler();
        const ids = new ConjunctionIds();
        const builder = new PolicyFlowBuilder(ids);
        const held = new Set<string>();
        let w: World = first;
        let gateway = 1;
        const check = (label: string) => {
          const node = { gatewayOfport: gateway, nodeIps: ['10.0.0.254', 'fd00::fe'] };
          const pods = compiler.compile({ ...w, node: NODE });
          const change = builder.build(node, pods);
          for (const f of change.remove)
            assert.ok(held.delete(f), `${label}: removes a flow it did not hold: ${f}`);
          for (const f of change.add) {
            assert.ok(!held.has(f), `${label}: adds a flow it held: ${f}`);
            held.add(f);
          }
          const want = policyFlows(node, pods, ids.clone()).flows;
          assert.deepEqual(sorted(builder.all()), sorted(want), `${label}: the builder's flows`);
          assert.deepEqual(sorted(held), sorted(want), `${label}: its changes applied`);
          totals.builds++;
          totals.changes += change.add.length + change.remove.length;
        };
        check('first');
        for (const [i, [other, c, gw]] of steps.entries()) {
          w = step(w, other, c);
          gateway = gw;
          check(`step ${i + 1}`);
        }
        totals.rebuilt += builder.rebuilt;
      },
    ),
    { numRuns: 300, includeErrorInReport: true, ...(seed === undefined ? {} : { seed: Number(seed) }) },
  );
  // Mostly incremental: a whole rebuild only where pods shared an address.
  assert.ok(totals.rebuilt < totals.builds / 2, JSON.stringify(totals));
});

test('one pod relabelled among many: the change is that pod and its rules, not the node', () => {
  const sel = (matchLabels: Record<string, string>) => ({ matchLabels, matchExpressions: [] });
  const pods = Array.from({ length: 100 }, (_, i) => ({
    namespace: 'ns',
    name: `p${i}`,
    labels: { app: `a${i % 5}` },
    ips: [`10.1.0.${i + 1}`],
    ports: [],
    hostNetwork: false,
    node: NODE,
  }));
  const policies = [0, 1, 2, 3, 4].map((a) => ({
    namespace: 'ns',
    name: `allow-a${a}`,
    podSelector: sel({ app: `a${a}` }),
    policyTypes: ['Ingress' as const],
    ingress: [
      {
        peers: [
          { kind: 'pods' as const, podSelector: sel({ app: `a${(a + 1) % 5}` }), namespaceSelector: null },
        ],
        ports: [{ protocol: 'TCP' as const, port: 80 }],
      },
    ],
    egress: [],
  }));
  const namespaces = [{ name: 'ns', labels: {} }];
  const node = { gatewayOfport: 1, nodeIps: ['10.1.0.254'] };
  const compiler = new IncrementalCompiler();
  const builder = new PolicyFlowBuilder(new ConjunctionIds());
  const all = builder.build(node, compiler.compile({ pods, policies, namespaces, node: NODE }));
  // p7 (a2) becomes a3: it leaves a2's rule (its own isolation changes) and moves between peer sets.
  const next = pods.map((p) => (p.name === 'p7' ? { ...p, labels: { app: 'a3' } } : p));
  const change = builder.build(node, compiler.compile({ pods: next, policies, namespaces, node: NODE }));
  assert.equal(builder.rebuilt, 0);
  assert.ok(change.add.length + change.remove.length > 0);
  assert.ok(
    change.add.length + change.remove.length < all.add.length / 5,
    `${change.add.length} added, ${change.remove.length} removed of ${all.add.length}`,
  );
});

test("what needs policyFlows' order (one rule entry with different peers; one address, two pods) is built its way", () => {
  const rule = (peer: string) => ({
    id: 'ns/p/ingress/0',
    entries: [{ peers: [peer], ports: [{ protocol: 'TCP' as const, first: 80, last: 80 }] }],
  });
  const pod = (name: string, ip: string, peer: string) => ({
    namespace: 'ns',
    name,
    ips: [ip],
    ingress: { policies: ['ns/p'], rules: [rule(peer)] },
    egress: null,
  });
  const node = { gatewayOfport: 1, nodeIps: ['10.1.0.254'] };
  const ids = new ConjunctionIds();
  const builder = new PolicyFlowBuilder(ids);
  const held = new Set<string>();
  const apply = (pods: ReturnType<typeof pod>[]) => {
    const change = builder.build(node, pods);
    for (const f of change.remove) held.delete(f);
    for (const f of change.add) held.add(f);
    const want = policyFlows(node, pods, ids.clone()).flows;
    assert.deepEqual(sorted(builder.all()), sorted(want));
    assert.deepEqual(sorted(held), sorted(want));
  };
  const a = pod('a', '10.1.0.1', '10.9.0.0/16');
  apply([a]);
  // b under the same rule entry with other peers: a hand-made input, never the compiler's.
  apply([a, pod('b', '10.1.0.2', '10.8.0.0/16')]);
  assert.equal(builder.rebuilt, 1);
  // c with a's address (a stale object): the address's flows are the first pod's.
  apply([a, pod('c', '10.1.0.1', '10.9.0.0/16')]);
  assert.equal(builder.rebuilt, 2);
  // Back to what a per-pod build can do.
  apply([a, pod('d', '10.1.0.3', '10.9.0.0/16')]);
  assert.equal(builder.rebuilt, 2);
});
