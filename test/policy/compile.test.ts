import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compilePolicies } from '../../src/policy/compile.js';
import type {
  ContainerPort,
  LabelSelector,
  Namespace,
  NetworkPolicy,
  Pod,
  PodPolicy,
  PolicyPeer,
  PolicyRule,
} from '../../src/policy/model.js';

const ALL: LabelSelector = { matchLabels: {}, matchExpressions: [] };
const NODE = 'n1';

function labels(l: Record<string, string>): LabelSelector {
  return { matchLabels: l, matchExpressions: [] };
}

function pod(namespace: string, name: string, ips: string[], extra: Partial<Pod> = {}): Pod {
  return { namespace, name, labels: {}, ips, ports: [], hostNetwork: false, node: NODE, ...extra };
}

function np(namespace: string, name: string, extra: Partial<NetworkPolicy> = {}): NetworkPolicy {
  return { namespace, name, podSelector: ALL, policyTypes: ['Ingress'], ingress: [], egress: [], ...extra };
}

function podsPeer(podSelector: LabelSelector, namespaceSelector: LabelSelector | null = null): PolicyPeer {
  return { kind: 'pods', podSelector, namespaceSelector };
}

function rule(peers: PolicyPeer[] | null, ports: PolicyRule['ports'] = null): PolicyRule {
  return { peers, ports };
}

const NAMESPACES: Namespace[] = [
  { name: 'a', labels: { team: 'x' } },
  { name: 'b', labels: { team: 'y' } },
];

function compile(policies: NetworkPolicy[], pods: Pod[], namespaces = NAMESPACES): PodPolicy[] {
  return compilePolicies({ policies, pods, namespaces, node: NODE });
}

function one(out: PodPolicy[], name: string): PodPolicy {
  const p = out.find((x) => x.name === name);
  assert.ok(p, `no compiled pod ${name}`);
  return p;
}

describe('the policy compiler', () => {
  test("only this node's pods with addresses and not hostNetwork, sorted; no policy: no isolation", () => {
    const out = compile(
      [],
      [
        pod('b', 'z', ['10.0.0.3']),
        pod('a', 'y', ['10.0.0.2', 'fd00::2']),
        pod('a', 'other-node', ['10.0.0.4'], { node: 'n2' }),
        pod('a', 'host', ['192.168.0.1'], { hostNetwork: true }),
        pod('a', 'no-ip', []),
      ],
    );
    assert.deepEqual(out, [
      { namespace: 'a', name: 'y', ips: ['10.0.0.2', 'fd00::2'], ingress: null, egress: null },
      { namespace: 'b', name: 'z', ips: ['10.0.0.3'], ingress: null, egress: null },
    ]);
  });

  test('isolation per direction; the allowed traffic is the union of the selecting policies', () => {
    const pods = [
      pod('a', 'web', ['10.0.0.2'], { labels: { app: 'web' } }),
      pod('a', 'c1', ['10.0.0.3'], { labels: { role: 'c1' } }),
      pod('a', 'c2', ['10.0.0.4', 'fd00::4'], { labels: { role: 'c2' } }),
    ];
    const out = compile(
      [
        np('a', 'p2', {
          podSelector: labels({ app: 'web' }),
          ingress: [rule([podsPeer(labels({ role: 'c2' }))])],
        }),
        np('a', 'p1', {
          podSelector: labels({ app: 'web' }),
          ingress: [rule([podsPeer(labels({ role: 'c1' }))])],
        }),
        np('a', 'e', { podSelector: labels({ role: 'c1' }), policyTypes: ['Egress'] }),
      ],
      pods,
    );
    assert.deepEqual(one(out, 'web').ingress, {
      policies: ['a/p1', 'a/p2'],
      rules: [
        { id: 'a/p1/ingress/0', entries: [{ peers: ['10.0.0.3/32'], ports: 'any' }] },
        { id: 'a/p2/ingress/0', entries: [{ peers: ['10.0.0.4/32', 'fd00::4/128'], ports: 'any' }] },
      ],
    });
    assert.equal(one(out, 'web').egress, null);
    assert.equal(one(out, 'c1').ingress, null);
    assert.deepEqual(one(out, 'c1').egress, { policies: ['a/e'], rules: [] });
  });

  test('`ingress: []` allows nothing; a rule without peers or ports allows everything', () => {
    const out = compile(
      [np('a', 'deny'), np('b', 'allow', { ingress: [rule(null)] })],
      [pod('a', 'x', ['10.0.0.2']), pod('b', 'y', ['10.0.0.3'])],
    );
    assert.deepEqual(one(out, 'x').ingress, { policies: ['a/deny'], rules: [] });
    assert.deepEqual(one(out, 'y').ingress, {
      policies: ['b/allow'],
      rules: [{ id: 'b/allow/ingress/0', entries: [{ peers: 'any', ports: 'any' }] }],
    });
  });

  test('peers: own namespace, namespaceSelector, both; never hostNetwork, labels:null or unseen namespaces', () => {
    const pods = [
      pod('a', 'dst', ['10.0.0.1']),
      pod('a', 'a-web', ['10.0.0.2'], { labels: { app: 'web' } }),
      pod('a', 'a-db', ['10.0.0.3'], { labels: { app: 'db' } }),
      pod('b', 'b-web', ['10.0.0.4'], { labels: { app: 'web' } }),
      pod('b', 'b-db', ['10.0.0.5'], { labels: { app: 'db' }, node: 'n2' }),
      pod('c', 'c-web', ['10.0.0.6'], { labels: { app: 'web' } }),
      pod('a', 'a-host', ['192.168.0.1'], { labels: { app: 'web' }, hostNetwork: true }),
      pod('a', 'a-new', ['10.0.0.7'], { labels: null }),
    ];
    const peersOf = (peer: PolicyPeer) => {
      const out = compile(
        [np('a', 'p', { podSelector: labels({ x: 'never' }), ingress: [rule([peer])] })],
        pods,
        [...NAMESPACES],
      );
      // The policy selects nobody; compile it for `dst` through a policy that selects everything.
      const out2 = compile([np('a', 'p', { ingress: [rule([peer])] })], pods);
      assert.equal(one(out, 'dst').ingress, null);
      const entries = one(out2, 'dst').ingress?.rules[0]?.entries ?? [];
      return entries.flatMap((e) => (e.peers === 'any' ? ['any'] : e.peers));
    };
    assert.deepEqual(peersOf(podsPeer(labels({ app: 'web' }))), ['10.0.0.2/32']);
    assert.deepEqual(peersOf(podsPeer(ALL, labels({ team: 'y' }))), ['10.0.0.4/32', '10.0.0.5/32']);
    assert.deepEqual(peersOf(podsPeer(labels({ app: 'web' }), ALL)), ['10.0.0.2/32', '10.0.0.4/32']);
    assert.deepEqual(peersOf(podsPeer(ALL)), ['10.0.0.1/32', '10.0.0.2/32', '10.0.0.3/32']);
    assert.deepEqual(peersOf(podsPeer(labels({ app: 'nothing' }))), []);
  });

  test('ipBlock peers: except taken out; pod addresses inside a block are not repeated', () => {
    const pods = [pod('a', 'dst', ['10.0.0.1']), pod('a', 'src', ['10.1.2.3'], { labels: { app: 'src' } })];
    const out = compile(
      [
        np('a', 'p', {
          policyTypes: ['Egress'],
          egress: [
            rule([
              { kind: 'ipBlock', ipBlock: { cidr: '10.1.0.0/16', except: ['10.1.128.0/17'] } },
              { kind: 'ipBlock', ipBlock: { cidr: 'fd00::/64', except: ['fd00::/65'] } },
              podsPeer(labels({ app: 'src' })),
            ]),
          ],
        }),
      ],
      pods,
    );
    assert.deepEqual(one(out, 'dst').egress?.rules[0]?.entries, [
      { peers: ['10.1.0.0/17', 'fd00::8000:0:0:0/65'], ports: 'any' },
    ]);
  });

  test('ports: numeric, ranges and whole protocols, sorted and merged', () => {
    const out = compile(
      [
        np('a', 'p', {
          ingress: [
            rule(null, [
              { protocol: 'UDP', port: 53 },
              { protocol: 'TCP', port: 8080, endPort: 8090 },
              { protocol: 'TCP', port: 8085, endPort: 9000 },
              { protocol: 'SCTP' },
            ]),
          ],
        }),
      ],
      [pod('a', 'x', ['10.0.0.2'])],
    );
    assert.deepEqual(one(out, 'x').ingress?.rules[0]?.entries, [
      {
        peers: 'any',
        ports: [
          { protocol: 'SCTP', first: 0, last: 65535 },
          { protocol: 'TCP', first: 8080, last: 9000 },
          { protocol: 'UDP', first: 53, last: 53 },
        ],
      },
    ]);
  });

  test("ingress named ports are the local pod's own: one rule, a different number per pod", () => {
    const http = (n: number, protocol: ContainerPort['protocol'] = 'TCP'): ContainerPort[] => [
      { name: 'http', containerPort: n, protocol },
    ];
    const out = compile(
      [
        np('a', 'p', {
          ingress: [
            rule(null, [
              { protocol: 'TCP', port: 'http' },
              { protocol: 'UDP', port: 53 },
            ]),
          ],
        }),
      ],
      [
        pod('a', 'x', ['10.0.0.2'], { ports: http(8080) }),
        pod('a', 'y', ['10.0.0.3'], { ports: http(9090) }),
        pod('a', 'z', ['10.0.0.4'], { ports: http(7070, 'UDP') }),
        pod('a', 'src', ['10.0.0.5'], { node: 'n2', ports: http(1) }),
      ],
    );
    const ports = (name: string) => one(out, name).ingress?.rules[0]?.entries.map((e) => e.ports);
    assert.deepEqual(ports('x'), [
      [
        { protocol: 'TCP', first: 8080, last: 8080 },
        { protocol: 'UDP', first: 53, last: 53 },
      ],
    ]);
    assert.deepEqual(ports('y'), [
      [
        { protocol: 'TCP', first: 9090, last: 9090 },
        { protocol: 'UDP', first: 53, last: 53 },
      ],
    ]);
    // z's "http" is UDP: the TCP named port does not resolve on it.
    assert.deepEqual(ports('z'), [[{ protocol: 'UDP', first: 53, last: 53 }]]);
    // With peer pods that have their own "http", still the local pod's.
    const fromPods = compile(
      [
        np('a', 'p', {
          podSelector: labels({ app: 'x' }),
          ingress: [rule([podsPeer(labels({ app: 'src' }))], [{ protocol: 'TCP', port: 'http' }])],
        }),
      ],
      [
        pod('a', 'x', ['10.0.0.2'], { labels: { app: 'x' }, ports: http(8080) }),
        pod('a', 'src', ['10.0.0.5'], { labels: { app: 'src' }, node: 'n2', ports: http(1) }),
      ],
    );
    assert.deepEqual(one(fromPods, 'x').ingress?.rules[0]?.entries, [
      { peers: ['10.0.0.5/32'], ports: [{ protocol: 'TCP', first: 8080, last: 8080 }] },
    ]);
    const only = compile(
      [np('a', 'p', { ingress: [rule(null, [{ protocol: 'TCP', port: 'http' }])] })],
      [pod('a', 'none', ['10.0.0.9'])],
    );
    assert.deepEqual(one(only, 'none').ingress?.rules, [{ id: 'a/p/ingress/0', entries: [] }]);
  });

  test("egress named ports are each destination pod's: one entry per resolution; only pods, even in an ipBlock", () => {
    const http = (n: number): ContainerPort[] => [{ name: 'http', containerPort: n, protocol: 'TCP' }];
    const pods = [
      pod('a', 'src', ['10.0.0.1']),
      pod('a', 'd1', ['10.0.0.2', 'fd00::2'], { labels: { app: 'd' }, ports: http(80), node: 'n2' }),
      pod('a', 'd2', ['10.0.0.3'], { labels: { app: 'd' }, ports: http(8080) }),
      pod('a', 'd3', ['10.0.0.4'], { labels: { app: 'd' }, ports: http(80) }),
      pod('a', 'd4', ['10.0.0.5'], { labels: { app: 'd' } }),
      pod('a', 'far', ['10.9.0.1'], { labels: { app: 'far' }, ports: http(80) }),
    ];
    const byPods = compile(
      [
        np('a', 'p', {
          podSelector: labels({}),
          policyTypes: ['Egress'],
          egress: [
            rule(
              [podsPeer(labels({ app: 'd' }))],
              [
                { protocol: 'TCP', port: 'http' },
                { protocol: 'UDP', port: 53 },
              ],
            ),
          ],
        }),
      ],
      pods,
    );
    assert.deepEqual(one(byPods, 'src').egress?.rules[0]?.entries, [
      {
        peers: ['10.0.0.2/32', '10.0.0.3/32', '10.0.0.4/32', '10.0.0.5/32', 'fd00::2/128'],
        ports: [{ protocol: 'UDP', first: 53, last: 53 }],
      },
      {
        peers: ['10.0.0.2/32', '10.0.0.4/32', 'fd00::2/128'],
        ports: [{ protocol: 'TCP', first: 80, last: 80 }],
      },
      { peers: ['10.0.0.3/32'], ports: [{ protocol: 'TCP', first: 8080, last: 8080 }] },
    ]);
    const byBlock = compile(
      [
        np('a', 'p', {
          policyTypes: ['Egress'],
          egress: [
            rule(
              [{ kind: 'ipBlock', ipBlock: { cidr: '10.0.0.0/24', except: ['10.0.0.4/32'] } }],
              [{ protocol: 'TCP', port: 'http' }],
            ),
          ],
        }),
      ],
      pods,
    );
    assert.deepEqual(one(byBlock, 'src').egress?.rules[0]?.entries, [
      { peers: ['10.0.0.2/32'], ports: [{ protocol: 'TCP', first: 80, last: 80 }] },
      { peers: ['10.0.0.3/32'], ports: [{ protocol: 'TCP', first: 8080, last: 8080 }] },
    ]);
  });

  test('fail closed before the Pod object: isolated with no rule in each direction its namespace has policies for', () => {
    const pods = [
      pod('a', 'new', ['10.0.0.2'], { labels: null }),
      pod('b', 'new', ['10.0.0.3'], { labels: null }),
    ];
    const out = compile(
      [
        np('a', 'never-selects-it', { podSelector: labels({ app: 'x' }), ingress: [rule(null)] }),
        np('a', 'egress', {
          podSelector: labels({ app: 'y' }),
          policyTypes: ['Egress'],
          egress: [rule(null)],
        }),
      ],
      pods,
    );
    assert.deepEqual(out[0], {
      namespace: 'a',
      name: 'new',
      ips: ['10.0.0.2'],
      ingress: { policies: ['a/never-selects-it'], rules: [] },
      egress: { policies: ['a/egress'], rules: [] },
    });
    assert.deepEqual(out[1], { namespace: 'b', name: 'new', ips: ['10.0.0.3'], ingress: null, egress: null });
  });

  test('the output does not depend on the order of the inputs', () => {
    const pods = [
      pod('a', 'p1', ['10.0.0.2'], { labels: { app: 'x' } }),
      pod('a', 'p2', ['10.0.0.1'], { labels: { app: 'x' } }),
      pod('b', 'p3', ['fd00::1', '10.0.0.9'], { labels: { app: 'y' } }),
    ];
    const policies = [
      np('a', 'z', { ingress: [rule([podsPeer(ALL, ALL)])] }),
      np('a', 'y', {
        policyTypes: ['Ingress', 'Egress'],
        egress: [rule([podsPeer(labels({ app: 'y' }), ALL), podsPeer(ALL)])],
      }),
      np('b', 'x', { ingress: [rule([{ kind: 'ipBlock', ipBlock: { cidr: '10.0.0.0/30', except: [] } }])] }),
    ];
    const a = compile(policies, pods);
    const b = compile([...policies].reverse(), [...pods].reverse(), [...NAMESPACES].reverse());
    assert.deepEqual(a, b);
    assert.deepEqual(one(a, 'p1').egress?.rules[0]?.entries[0]?.peers, [
      '10.0.0.1/32',
      '10.0.0.2/32',
      '10.0.0.9/32',
      'fd00::1/128',
    ]);
  });
});
