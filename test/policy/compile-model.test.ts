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
import type {
  ContainerPort,
  DirectionPolicy,
  IpBlock,
  LabelSelector,
  NetworkPolicy,
  Pod,
  PolicyPeer,
  PolicyPort,
  PolicyRule,
  Protocol,
} from '../../src/policy/model.js';
import { labelSelectorArbitrary } from './label-selector-arbitrary.js';
import { allowedEgress, allowedIngress, inCidr, type World } from './policy-oracle.js';

const NODE = 'n1';
const PROTOCOLS: Protocol[] = ['TCP', 'UDP', 'SCTP'];
/** TCP twice as likely, so that named ports meet container ports of their protocol often. */
const protocol = fc.constantFrom<Protocol>('TCP', 'TCP', 'UDP', 'SCTP');
const PORT_NAMES = ['http', 'dns', 'metrics'];
const NUMBERS = [53, 80, 81, 82, 443];
const KEYS = ['app', 'tier'];
const VALUES = ['x', 'y'];
const NS_NAMES = ['a', 'b', 'c'];

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

// --- Generators. ---

const selector: fc.Arbitrary<LabelSelector> = labelSelectorArbitrary(KEYS, VALUES);

/** A prefix inside 10.0.0.0/24 or fd00::/120, where the pods' addresses are. */
const prefix = (family: 4 | 6, minLen: number) =>
  fc.tuple(fc.integer({ min: minLen, max: 8 }), fc.integer({ min: 0, max: 255 })).map(([extra, low]) => {
    const hostBits = 8 - extra;
    const net = (low >> hostBits) << hostBits;
    return family === 4 ? `10.0.0.${net}/${24 + extra}` : `fd00::${net.toString(16)}/${120 + extra}`;
  });

const ipBlock: fc.Arbitrary<IpBlock> = fc.constantFrom(4 as const, 6 as const).chain((family) =>
  prefix(family, 0).chain((cidr) => {
    const len = Number(cidr.split('/')[1]);
    const base = family === 4 ? 24 : 120;
    if (len >= base + 8) return fc.constant({ cidr, except: [] });
    return fc.array(prefix(family, len - base + 1), { maxLength: 3 }).map((ex) => ({
      cidr,
      except: [...new Set(ex.filter((e) => inCidr(e.split('/')[0] as string, cidr)))],
    }));
  }),
);

const peer: fc.Arbitrary<PolicyPeer> = fc.oneof(
  fc.record({
    kind: fc.constant('pods' as const),
    podSelector: selector,
    namespaceSelector: fc.option(selector, { nil: null }),
  }),
  fc.record({ kind: fc.constant('ipBlock' as const), ipBlock }),
);

const port: fc.Arbitrary<PolicyPort> = fc.oneof(
  fc.record({ protocol: protocol }),
  fc.record({ protocol: protocol, port: fc.constantFrom(...NUMBERS) }),
  fc
    .record({
      protocol: protocol,
      port: fc.constantFrom(...NUMBERS),
      extra: fc.integer({ min: 0, max: 2 }),
    })
    .map(({ protocol, port, extra }) => ({ protocol, port, endPort: port + extra })),
  fc.record({ protocol: protocol, port: fc.constantFrom(...PORT_NAMES) }),
);

/** Only named ports, for the world that stresses their resolution. */
const namedPort: fc.Arbitrary<PolicyPort> = fc.record({ protocol, port: fc.constantFrom(...PORT_NAMES) });

const rule = (port: fc.Arbitrary<PolicyPort>): fc.Arbitrary<PolicyRule> =>
  fc.record({
    peers: fc.option(fc.array(peer, { minLength: 1, maxLength: 3 }), { nil: null, freq: 3 }),
    ports: fc.option(fc.array(port, { minLength: 1, maxLength: 3 }), { nil: null, freq: 3 }),
  });

const policy = (i: number, port: fc.Arbitrary<PolicyPort>): fc.Arbitrary<NetworkPolicy> =>
  fc
    .record({
      namespace: fc.constantFrom(...NS_NAMES),
      podSelector: selector,
      types: fc.constantFrom(['Ingress'], ['Egress'], ['Ingress', 'Egress']) as fc.Arbitrary<
        Array<'Ingress' | 'Egress'>
      >,
      ingress: fc.array(rule(port), { maxLength: 3 }),
      egress: fc.array(rule(port), { maxLength: 3 }),
    })
    .map((p) => ({
      namespace: p.namespace,
      name: `p${i}`,
      podSelector: p.podSelector,
      policyTypes: p.types,
      ingress: p.ingress,
      egress: p.egress,
    }));

const containerPorts = (unnamed: boolean): fc.Arbitrary<ContainerPort[]> =>
  fc.array(
    fc.record({
      name: unnamed
        ? fc.option(fc.constantFrom(...PORT_NAMES), { nil: undefined, freq: 4 })
        : fc.constantFrom(...PORT_NAMES),
      containerPort: fc.constantFrom(...NUMBERS, 8080),
      protocol: protocol,
    }),
    { maxLength: 4 },
  );

const world = (port: fc.Arbitrary<PolicyPort>, unnamed: boolean): fc.Arbitrary<World> =>
  fc
    .record({
      namespaces: fc.subarray(NS_NAMES, { minLength: 1 }).chain((names) =>
        fc.tuple(
          ...names.map((name) =>
            fc
              .dictionary(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES), { maxKeys: 2 })
              .map((labels) => ({
                name,
                labels,
              })),
          ),
        ),
      ),
      pods: fc.array(
        fc.record({
          namespace: fc.constantFrom(...NS_NAMES),
          labels: fc.option(
            fc.dictionary(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES), { maxKeys: 3 }),
            {
              nil: null,
              freq: 6,
            },
          ),
          families: fc.constantFrom([4], [6], [4, 6]),
          ports: containerPorts(unnamed),
          hostNet: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
          node: fc.constantFrom(NODE, NODE, 'n2'),
        }),
        { minLength: 1, maxLength: 10 },
      ),
      policies: fc
        .integer({ min: 0, max: 6 })
        .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => policy(i, port)))),
      offset: fc.integer({ min: 0, max: 200 }),
    })
    .map(({ namespaces, pods, policies, offset }) => ({
      namespaces,
      policies,
      // Unique addresses, spread over the ipBlocks' space.
      pods: pods.map((p, i) => ({
        namespace: p.namespace,
        name: `pod${i}`,
        labels: p.labels,
        ips: p.families.map((f) =>
          f === 4 ? `10.0.0.${(offset + i * 7) % 256}` : `fd00::${((offset + i * 11) % 256).toString(16)}`,
        ),
        ports: p.ports,
        hostNetwork: p.hostNet,
        node: p.node,
      })),
    }));

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
