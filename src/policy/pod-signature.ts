/**
 * A local pod's compiled policy, as one short string: equal signatures mean equal `PodPolicy` values
 * (addresses, isolating policies, every rule's id, peers and ports), so a backend that installs each
 * pod's share of the datapath can leave a pod whose signature did not change as it is, and touch only
 * what a change touched.
 *
 * Compiled rules are shared objects (one per rule and resolution of its named ports, whatever the
 * number of pods it applies to), and a rule can list thousands of peers: each rule object is
 * serialised and hashed once (remembered per object), and a pod's signature names its rules by hash.
 * The compiler's output is read-only, so an object's hash stays right.
 */
import { createHash } from 'node:crypto';
import type { CompiledRule, DirectionPolicy, PodPolicy } from './model.js';

const hashes = new WeakMap<object, string>();

/**
 * A compiled object's content (a rule, an entry) as a SHA-256 of its JSON, remembered per object:
 * the compiler's output is read-only, so an object's hash stays right.
 */
export function contentHash(value: object): string {
  let h = hashes.get(value);
  if (h === undefined) {
    h = createHash('sha256').update(JSON.stringify(value)).digest('base64');
    hashes.set(value, h);
  }
  return h;
}

const ruleHash = (rule: CompiledRule): string => contentHash(rule);

function direction(d: DirectionPolicy | null): unknown {
  return d === null ? null : [d.policies, d.rules.map(ruleHash)];
}

export function podPolicySignature(pod: PodPolicy): string {
  return JSON.stringify([pod.namespace, pod.name, pod.ips, direction(pod.ingress), direction(pod.egress)]);
}
