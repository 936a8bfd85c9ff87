/**
 * The NetworkPolicy benches' input at issue 28's scale (bench/policy-compile.ts,
 * bench/policy-install.ts): one generator, so both measure the same world.
 */
import type { CompileInput } from '../src/policy/compile.js';
import type { Namespace, NetworkPolicy, Pod } from '../src/policy/model.js';

const NAMESPACES = 20;
const APPS = 7;

/**
 * `pods` pods on node `n1` in 20 namespaces and `policies` policies: each policy selects one app (of 7)
 * of its namespace, with two ingress rules (pods of its namespace on a numeric and a named port; pods
 * of one app in the namespaces of one team on a UDP range) and one egress rule (an ipBlock with an
 * except, plus the servers of another team's namespaces, on a named port).
 */
export function policyInput(podCount: number, policyCount: number): CompileInput {
  const namespaces: Namespace[] = Array.from({ length: NAMESPACES }, (_, i) => ({
    name: `ns${i}`,
    labels: { 'kubernetes.io/metadata.name': `ns${i}`, team: `t${i % 4}` },
  }));
  const pods: Pod[] = Array.from({ length: podCount }, (_, i) => ({
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
  const policies: NetworkPolicy[] = Array.from({ length: policyCount }, (_, i) => ({
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

/** `input` with pod `index`'s app label set to `app`: a new array and a new pod, as a watch event gives. */
export function relabel(input: CompileInput, index: number, app: string): CompileInput {
  const pods = [...input.pods];
  const pod = pods[index] as Pod;
  pods[index] = { ...pod, labels: { ...(pod.labels ?? {}), app } };
  return { ...input, pods };
}
