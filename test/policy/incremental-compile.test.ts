/**
 * The incremental compiler against the whole one: random worlds (policy-world-arbitrary.ts), each
 * followed by a few steps that mix it with another random world object by object (kept, kept as an
 * equal copy as the pod cache hands them out, labels changed, replaced, removed, added), and after
 * each step the incremental output must deep-equal `compilePolicies` of the same input. Addresses move
 * between worlds, so steps also make two pods claim one address. Replay a failure with
 * PODWIRE_POLICY_SEED=SEED.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { compilePolicies } from '../../src/policy/compile.js';
import { IncrementalCompiler } from '../../src/policy/incremental-compile.js';
import type { NetworkPolicy, Pod } from '../../src/policy/model.js';
import type { World } from './policy-oracle.js';
import { choices, NODE, port, step, world } from './policy-world-arbitrary.js';

describe('the incremental compiler gives what the whole compiler gives', () => {
  test('over random worlds and 1-6 random steps each (300 runs)', () => {
    const seed = process.env.PODWIRE_POLICY_SEED;
    const totals = { incremental: 0, kept: 0, compiled: 0, whole: 0 };
    fc.assert(
      fc.property(
        world(port, true),
        fc.array(fc.tuple(world(port, true), choices), { minLength: 1, maxLength: 6 }),
        (first, steps) => {
          const inc = new IncrementalCompiler();
          let w = first;
          const input = (x: World) => ({ ...x, node: NODE });
          assert.deepEqual(inc.compile(input(w)), compilePolicies(input(w)));
          for (const [i, [other, c]] of steps.entries()) {
            w = step(w, other, c);
            assert.deepEqual(inc.compile(input(w)), compilePolicies(input(w)), `step ${i + 1}`);
          }
          totals.incremental += inc.stats.incremental;
          totals.kept += inc.stats.podsKept;
          totals.compiled += inc.stats.podsCompiled;
          totals.whole += inc.stats.whole;
        },
      ),
      { numRuns: 300, includeErrorInReport: true, ...(seed === undefined ? {} : { seed: Number(seed) }) },
    );
    // The comparison proves something only where pods were kept and compiled again incrementally.
    assert.ok(totals.incremental > 300 && totals.kept > 300 && totals.compiled > 300, JSON.stringify(totals));
  });

  test('a new pod that claims a peer’s address takes it over for named ports, as a whole compile has it', () => {
    const sel = (matchLabels: Record<string, string>) => ({ matchLabels, matchExpressions: [] });
    const pod = (name: string, labels: Record<string, string>, port: number): Pod => ({
      namespace: 'a',
      name,
      labels,
      ips: ['10.0.0.9'],
      ports: [{ name: 'http', containerPort: port, protocol: 'TCP' }],
      hostNetwork: false,
      node: 'n2',
    });
    const client: Pod = { ...pod('client', { role: 'client' }, 1), ips: ['10.0.0.1'], node: NODE };
    // The client may reach pods labelled server on their port named http.
    const policies: NetworkPolicy[] = [
      {
        namespace: 'a',
        name: 'out',
        podSelector: sel({ role: 'client' }),
        policyTypes: ['Egress'],
        ingress: [],
        egress: [
          {
            peers: [{ kind: 'pods', podSelector: sel({ role: 'server' }), namespaceSelector: null }],
            ports: [{ protocol: 'TCP', port: 'http' }],
          },
        ],
      },
    ];
    const namespaces = [{ name: 'a', labels: {} }];
    const inc = new IncrementalCompiler();
    const first = [client, pod('server', { role: 'server' }, 80)];
    inc.compile({ pods: first, policies, namespaces, node: NODE });
    // A stale object under a name before "server" claims the address: the whole compile gives the
    // address to it (first by name), so the server's http is its 81 now; the rule did not select it.
    const next = [...first, pod('old', { role: 'gone' }, 81)];
    const want = compilePolicies({ pods: next, policies, namespaces, node: NODE });
    assert.deepEqual(want[0]?.egress?.rules[0]?.entries[0]?.ports, [
      { protocol: 'TCP', first: 81, last: 81 },
    ]);
    assert.deepEqual(inc.compile({ pods: next, policies, namespaces, node: NODE }), want);
    assert.equal(inc.stats.lastWholeReason, 'a changed pod shares an address');
  });

  test('a pod in an ipBlock that stops being a peer leaves the named ports towards the block', () => {
    const server: Pod = {
      namespace: 'a',
      name: 'server',
      labels: { any: 'thing' },
      ips: ['10.0.0.9'],
      ports: [{ name: 'http', containerPort: 80, protocol: 'TCP' }],
      hostNetwork: false,
      node: 'n2',
    };
    const client: Pod = { ...server, name: 'client', ips: ['10.0.0.1'], ports: [], node: NODE };
    const policies: NetworkPolicy[] = [
      {
        namespace: 'a',
        name: 'out',
        podSelector: { matchLabels: {}, matchExpressions: [] },
        policyTypes: ['Egress'],
        ingress: [],
        egress: [
          {
            peers: [{ kind: 'ipBlock', ipBlock: { cidr: '10.0.0.0/24', except: [] } }],
            ports: [{ protocol: 'TCP', port: 'http' }],
          },
        ],
      },
    ];
    const namespaces = [{ name: 'a', labels: {} }];
    const inc = new IncrementalCompiler();
    inc.compile({ pods: [client, server], policies, namespaces, node: NODE });
    // Same addresses and ports, but no longer a peer (its labels unknown): nothing named resolves.
    const next = [client, { ...server, labels: null }];
    const want = compilePolicies({ pods: next, policies, namespaces, node: NODE });
    assert.deepEqual(want[0]?.egress?.rules[0]?.entries, []);
    assert.deepEqual(inc.compile({ pods: next, policies, namespaces, node: NODE }), want);
    assert.equal(inc.stats.incremental, 1);
  });

  test('one pod relabelled among 200 compiles the pods it touches, keeps the rest as they were', () => {
    const sel = (matchLabels: Record<string, string>) => ({ matchLabels, matchExpressions: [] });
    const pods: Pod[] = Array.from({ length: 200 }, (_, i) => ({
      namespace: `ns${i % 10}`,
      name: `pod${i}`,
      labels: { app: `app${Math.floor(i / 10) % 5}` },
      ips: [`10.0.${i >> 8}.${i & 255}`],
      ports: [],
      hostNetwork: false,
      node: NODE,
    }));
    // In each namespace: app0 admits app1 of its own namespace.
    const policies: NetworkPolicy[] = Array.from({ length: 10 }, (_, i) => ({
      namespace: `ns${i}`,
      name: 'web',
      podSelector: sel({ app: 'app0' }),
      policyTypes: ['Ingress'],
      ingress: [
        {
          peers: [{ kind: 'pods', podSelector: sel({ app: 'app1' }), namespaceSelector: null }],
          ports: null,
        },
      ],
      egress: [],
    }));
    const namespaces = Array.from({ length: 10 }, (_, i) => ({ name: `ns${i}`, labels: {} }));
    const inc = new IncrementalCompiler();
    const before = inc.compile({ pods, policies, namespaces, node: NODE });
    // ns1 holds pods 1, 11, 21, ..., 191: app0 are 1, 51, 101, 151; app1 are 11, 61, 111, 161. pod11
    // becomes app2: ns1's four app0 pods lose a peer, and pod11 itself changed; nothing else did.
    const after = pods.map((p) => (p.name === 'pod11' ? { ...p, labels: { app: 'app2' } } : { ...p }));
    const out = inc.compile({ pods: after, policies, namespaces, node: NODE });
    assert.deepEqual(out, compilePolicies({ pods: after, policies, namespaces, node: NODE }));
    assert.equal(inc.stats.podsCompiled, 5);
    assert.equal(inc.stats.podsKept, 195);
    const kept = out.filter((p, i) => p === before[i]).length;
    assert.equal(kept, 195, 'kept pods are the previous run’s objects');
  });
});
