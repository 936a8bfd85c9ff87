/**
 * The compiler against a model: random namespaces, labelled pods and policies (both families,
 * ipBlocks with except, numeric and named ports, endPort, every protocol), and for sampled
 * (source, destination, protocol, port) the verdict of an independent, literal reading of the
 * NetworkPolicy API documentation (`policy-oracle.ts`'s `allowedIngress`, `allowedEgress`: they walk
 * the policies as the documentation words them, sharing no code with the compiler) against what the
 * compiled `PodPolicy` allows (`compiledAllows`). Replay a failure with PODWIRE_POLICY_SEED=SEED
 * (fast-check prints the seed and path).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { compilePolicies } from '../../src/policy/compile.js';
import type { DirectionPolicy, Pod, Protocol } from '../../src/policy/model.js';
import { allowedEgress, allowedIngress, inCidr, type World } from './policy-oracle.js';
import { NODE, NUMBERS, namedPort, PROTOCOLS, port, world } from './policy-world-arbitrary.js';

// --- The evaluator of compiled output. ---

function compiledAllows(d: DirectionPolicy | null, peer: string, proto: Protocol, n: number): boolean {
  if (d === null) return true;
  return d.rules.some((r) =>
    r.entries.some(
      (e) =>
        (e.peers === 'any' || e.peers.some((c) => inCidr(peer, c))) &&
        (e.ports === 'any' || e.ports.some((p) => p.protocol === proto && n >= p.first && n <= p.last)),
    ),
  );
}

/** Compares the model and the compiled output over `runs` generated worlds. */
function check(worlds: fc.Arbitrary<World>, runs: number): void {
  const seed = process.env.PODWIRE_POLICY_SEED;
  /** Verdicts on isolated directions: both kinds must occur, or the comparison proved little. */
  const verdicts = { allowed: 0, denied: 0 };
  fc.assert(
    fc.property(
      worlds,
      fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 8 }),
      (w, extra) => {
        const out = compilePolicies({
          policies: w.policies,
          pods: w.pods,
          namespaces: w.namespaces,
          node: NODE,
        });
        const local = w.pods.filter((p) => p.node === NODE && !p.hostNetwork && p.ips.length > 0);
        assert.deepEqual(
          out.map((p) => `${p.namespace}/${p.name}`).sort(),
          local.map((p) => `${p.namespace}/${p.name}`).sort(),
        );
        // Every pod's address, and addresses of no pod (in and out of the ipBlocks' space).
        const ips = [
          ...w.pods.flatMap((p) => p.ips),
          ...extra.map((n) => `10.0.0.${n}`),
          ...extra.map((n) => `fd00::${n.toString(16)}`),
          '10.0.1.1',
          'fd00::100',
        ];
        for (const compiled of out) {
          const pod = local.find(
            (p) => p.namespace === compiled.namespace && p.name === compiled.name,
          ) as Pod;
          for (const ip of ips)
            for (const proto of PROTOCOLS)
              for (const n of [...NUMBERS, 8080, 9]) {
                const ingress = allowedIngress(w, ip, pod, proto, n);
                assert.equal(
                  compiledAllows(compiled.ingress, ip, proto, n),
                  ingress,
                  `ingress ${ip} -> ${pod.namespace}/${pod.name} ${proto}/${n}: model says ${ingress}`,
                );
                const egress = allowedEgress(w, pod, ip, proto, n);
                assert.equal(
                  compiledAllows(compiled.egress, ip, proto, n),
                  egress,
                  `egress ${pod.namespace}/${pod.name} -> ${ip} ${proto}/${n}: model says ${egress}`,
                );
                for (const [d, v] of [
                  [compiled.ingress, ingress],
                  [compiled.egress, egress],
                ] as const)
                  if (d !== null) verdicts[v ? 'allowed' : 'denied']++;
              }
        }
      },
    ),
    { numRuns: runs, includeErrorInReport: true, ...(seed === undefined ? {} : { seed: Number(seed) }) },
  );
  assert.ok(verdicts.allowed > 1000 && verdicts.denied > 1000, JSON.stringify(verdicts));
}

describe('the compiler against a literal reading of the API documentation', () => {
  test('ingress and egress verdicts agree on sampled traffic (every feature, 300 worlds)', () => {
    check(world(port, true), 300);
  });

  test('the same where every port is named and most container ports have names (200 worlds)', () => {
    check(world(namedPort, false), 200);
  });
});
