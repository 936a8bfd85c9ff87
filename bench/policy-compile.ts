/**
 * The policy compiler's cost at issue 28's scale: 1000 pods on one node and 1000 policies (20
 * namespaces of 50 pods and 50 policies; each policy selects one app of its namespace and has two
 * ingress rules, pods of its namespace on numeric and named ports and pods of labelled namespaces,
 * and one egress rule, an ipBlock with excepts plus pods elsewhere on a named port). The target is a
 * full compile within 1 s; what a machine does is put beside a reference measured in the same run:
 * JSON-decoding the very same input once (what reading the objects costs at all), so the ratio
 * does not move with the machine's speed.
 *
 *   node dist/bench/policy-compile.js [--pods 1000] [--policies 1000] [--runs 15]
 */
import { parseArgs } from 'node:util';
import { compilePolicies } from '../src/policy/compile.js';
import type { Namespace, NetworkPolicy, Pod } from '../src/policy/model.js';
import { ratio, summarize } from './stats.js';

const { values } = parseArgs({
  options: { pods: { type: 'string' }, policies: { type: 'string' }, runs: { type: 'string' } },
});
const PODS = Number(values.pods ?? 1000);
const POLICIES = Number(values.policies ?? 1000);
const RUNS = Number(values.runs ?? 15);
const NAMESPACES = 20;
const APPS = 7;

function input(): { policies: NetworkPolicy[]; pods: Pod[]; namespaces: Namespace[]; node: string } {
  const namespaces: Namespace[] = Array.from({ length: NAMESPACES }, (_, i) => ({
    name: `ns${i}`,
    labels: { 'kubernetes.io/metadata.name': `ns${i}`, team: `t${i % 4}` },
  }));
  const pods: Pod[] = Array.from({ length: PODS }, (_, i) => ({
    namespace: `ns${i % NAMESPACES}`,
    name: `pod${i}`,
    labels: { app: `app${i % APPS}`, role: i % 3 === 0 ? 'client' : 'server' },
    ips:
      i % 2 === 0
        ? [`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`]
        : [`10.0.${(i >> 8) & 255}.${i & 255}`, `fd00::${i.toString(16)}`],
    ports: [{ name: 'http', containerPort: 8000 + (i % 7), protocol: 'TCP' }],
    hostNetwork: false,
    node: 'n1',
  }));
  const sel = (matchLabels: Record<string, string>) => ({ matchLabels, matchExpressions: [] });
  const policies: NetworkPolicy[] = Array.from({ length: POLICIES }, (_, i) => ({
    namespace: `ns${i % NAMESPACES}`,
    name: `policy${i}`,
    podSelector: sel({ app: `app${i % APPS}` }),
    policyTypes: ['Ingress', 'Egress'],
    ingress: [
      {
        peers: [{ kind: 'pods', podSelector: sel({ role: 'client' }), namespaceSelector: null }],
        ports: [
          { protocol: 'TCP', port: 80 },
          { protocol: 'TCP', port: 'http' },
        ],
      },
      {
        peers: [
          {
            kind: 'pods',
            podSelector: sel({ app: `app${(i + 1) % APPS}` }),
            namespaceSelector: sel({ team: `t${i % 4}` }),
          },
        ],
        ports: [{ protocol: 'UDP', port: 5000, endPort: 5100 }],
      },
    ],
    egress: [
      {
        peers: [
          { kind: 'ipBlock', ipBlock: { cidr: '10.0.0.0/16', except: [`10.0.${i % 256}.0/24`] } },
          {
            kind: 'pods',
            podSelector: sel({ role: 'server' }),
            namespaceSelector: sel({ team: `t${(i + 1) % 4}` }),
          },
        ],
        ports: [{ protocol: 'TCP', port: 'http' }],
      },
    ],
  }));
  return { policies, pods, namespaces, node: 'n1' };
}

function time(fn: () => unknown): number {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const data = input();
const text = JSON.stringify(data);
let last = compilePolicies(data);
for (let i = 0; i < 3; i++) {
  last = compilePolicies(data);
  JSON.parse(text);
}
const compile: number[] = [];
const decode: number[] = [];
for (let i = 0; i < RUNS; i++) {
  // Alternate, so that both see the same state of the machine.
  compile.push(time(() => compilePolicies(data)));
  decode.push(time(() => JSON.parse(text)));
}
const c = summarize(compile);
const d = summarize(decode);
let rules = 0;
let entries = 0;
let peers = 0;
for (const p of last)
  for (const dir of [p.ingress, p.egress])
    for (const r of dir?.rules ?? []) {
      rules++;
      entries += r.entries.length;
      for (const e of r.entries) peers += e.peers === 'any' ? 1 : e.peers.length;
    }
console.log(
  JSON.stringify(
    {
      pods: PODS,
      policies: POLICIES,
      compiledPods: last.length,
      rules,
      entries,
      peerCidrs: peers,
      inputBytes: text.length,
      compileMs: c,
      jsonDecodeMs: d,
      ratioToDecode: { median: ratio(c.median, d.median), p99: ratio(c.p99, d.p99) },
      ratioToBudget1s: { median: ratio(c.median, 1000), p99: ratio(c.p99, 1000) },
    },
    null,
    2,
  ),
);
