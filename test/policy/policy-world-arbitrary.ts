/**
 * Random NetworkPolicy worlds for the compiler's tests (compile-model.test.ts,
 * incremental-compile.test.ts): namespaces, labelled pods on two nodes (both families, container
 * ports with and without names, some hostNetwork, some whose Pod object has not arrived) and
 * policies with every feature (ipBlocks with except, numeric and named ports, endPort, every
 * protocol), over a small space of keys, values and addresses so that selectors and blocks meet.
 */
import fc from 'fast-check';
import type {
  ContainerPort,
  IpBlock,
  LabelSelector,
  Namespace,
  NetworkPolicy,
  Pod,
  PolicyPeer,
  PolicyPort,
  PolicyRule,
  Protocol,
} from '../../src/policy/model.js';
import { labelSelectorArbitrary } from './label-selector-arbitrary.js';
import { inCidr, type World } from './policy-oracle.js';

export const NODE = 'n1';
export const PROTOCOLS: Protocol[] = ['TCP', 'UDP', 'SCTP'];
/** TCP twice as likely, so that named ports meet container ports of their protocol often. */
const protocol = fc.constantFrom<Protocol>('TCP', 'TCP', 'UDP', 'SCTP');
export const PORT_NAMES = ['http', 'dns', 'metrics'];
export const NUMBERS = [53, 80, 81, 82, 443];
export const KEYS = ['app', 'tier'];
export const VALUES = ['x', 'y'];
export const NS_NAMES = ['a', 'b', 'c'];

export const selector: fc.Arbitrary<LabelSelector> = labelSelectorArbitrary(KEYS, VALUES);

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

export const port: fc.Arbitrary<PolicyPort> = fc.oneof(
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
export const namedPort: fc.Arbitrary<PolicyPort> = fc.record({
  protocol,
  port: fc.constantFrom(...PORT_NAMES),
});

const rule = (port: fc.Arbitrary<PolicyPort>): fc.Arbitrary<PolicyRule> =>
  fc.record({
    peers: fc.option(fc.array(peer, { minLength: 1, maxLength: 3 }), { nil: null, freq: 3 }),
    ports: fc.option(fc.array(port, { minLength: 1, maxLength: 3 }), { nil: null, freq: 3 }),
  });

export const policy = (i: number, port: fc.Arbitrary<PolicyPort>): fc.Arbitrary<NetworkPolicy> =>
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

export const world = (port: fc.Arbitrary<PolicyPort>, unnamed: boolean): fc.Arbitrary<World> =>
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

// --- Steps from one world to the next (incremental-compile.test.ts, policy-flow-builder.test.ts). ---

/** What a step does to one object: keep, keep an equal copy, change one part, replace, remove. */
export type Choice = 0 | 1 | 2 | 3 | 4;

function mix<T>(
  before: readonly T[],
  other: readonly T[],
  key: (t: T) => string,
  choices: readonly Choice[],
  changePart: (a: T, b: T) => T,
): T[] {
  const a = new Map(before.map((t) => [key(t), t]));
  const b = new Map(other.map((t) => [key(t), t]));
  const out: T[] = [];
  [...new Set([...a.keys(), ...b.keys()])].sort().forEach((k, i) => {
    const choice = choices[i % choices.length] as Choice;
    const x = a.get(k);
    const y = b.get(k);
    if (x !== undefined && y !== undefined) {
      const next = [x, structuredClone(x), changePart(x, y), y, undefined][choice];
      if (next !== undefined) out.push(next);
    } else if (x !== undefined) {
      if (choice === 1) out.push(structuredClone(x));
      else if (choice !== 4) out.push(x);
    } else if (y !== undefined && choice >= 2 && choice <= 3) {
      out.push(y);
    }
  });
  return out;
}

export function step(w: World, other: World, choices: readonly Choice[]): World {
  return {
    pods: mix<Pod>(
      w.pods,
      other.pods,
      (p) => p.name,
      choices,
      (x, y) => ({ ...x, labels: y.labels }),
    ),
    policies: mix<NetworkPolicy>(
      w.policies,
      other.policies,
      (p) => `${p.namespace}/${p.name}`,
      choices,
      (x, y) => ({ ...x, ingress: y.ingress }),
    ),
    namespaces: mix<Namespace>(
      w.namespaces,
      other.namespaces,
      (n) => n.name,
      choices,
      (x, y) => ({
        ...x,
        labels: y.labels,
      }),
    ),
  };
}

export const choices = fc.array(fc.constantFrom<Choice>(0, 0, 0, 1, 1, 2, 3, 4), {
  minLength: 1,
  maxLength: 12,
});
