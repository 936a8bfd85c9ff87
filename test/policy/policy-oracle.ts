/**
 * An independent, literal reading of the NetworkPolicy API documentation (networking.k8s.io/v1):
 * given namespaces, pods and policies, whether one packet (source, destination, protocol, port) is
 * allowed in each direction. It walks the policies as the documentation words them and shares no
 * code with `src/policy/` (only its input types, which compile to nothing), so that the compiler
 * (`test/policy/compile-model.test.ts`) and the datapaths (`test/datapath/policy-model.ts`) are
 * checked against a reading that did not come from them. Slow on purpose: no index, no cache.
 */
import type {
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

export interface World {
  namespaces: Namespace[];
  pods: Pod[];
  policies: NetworkPolicy[];
}

// --- The oracle's own address arithmetic: text to [family, value], CIDR membership. ---

/** IPv4 dotted quad or IPv6 text (with at most one "::", no embedded IPv4) to its family and value. */
export function addr(text: string): [4 | 6, bigint] {
  if (!text.includes(':')) {
    const parts = text.split('.').map(Number);
    if (parts.length !== 4 || parts.some((n) => !Number.isInteger(n) || n < 0 || n > 255))
      throw new Error(`oracle: not an IPv4 address: ${text}`);
    return [4, parts.reduce((v, n) => v * 256n + BigInt(n), 0n)];
  }
  const [head = '', tail] = text.split('::');
  const groups = (s: string) => (s === '' ? [] : s.split(':'));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const missing = 8 - left.length - right.length;
  if ((tail === undefined && missing !== 0) || missing < 0)
    throw new Error(`oracle: not an IPv6 address: ${text}`);
  const all = [...left, ...Array<string>(missing).fill('0'), ...right];
  return [6, all.reduce((v, g) => v * 65536n + BigInt(`0x${g}`), 0n)];
}

export function inCidr(ip: string, cidr: string): boolean {
  const [prefix, len] = cidr.split('/');
  const [f1, v1] = addr(ip);
  const [f2, v2] = addr(prefix as string);
  if (f1 !== f2) return false;
  const host = BigInt((f1 === 4 ? 32 : 128) - Number(len));
  return v1 >> host === v2 >> host;
}

// --- The reading. ---

export function labelsMatch(s: LabelSelector, labels: Record<string, string>): boolean {
  const ok = Object.entries(s.matchLabels).every(([key, v]) => has(labels, key) && labels[key] === v);
  return (
    ok &&
    s.matchExpressions.every((e) => {
      const present = has(labels, e.key);
      if (e.operator === 'In') return present && e.values.includes(labels[e.key] as string);
      if (e.operator === 'NotIn') return !present || !e.values.includes(labels[e.key] as string);
      if (e.operator === 'Exists') return present;
      return !present;
    })
  );
}

function has(labels: Record<string, string>, key: string): boolean {
  return Object.keys(labels).includes(key);
}

/** The pod that owns `ip` and can be a peer: its Pod object seen, not hostNetwork. */
export function podAt(w: World, ip: string): Pod | undefined {
  return w.pods.find((p) => p.labels !== null && !p.hostNetwork && p.ips.some((q) => sameIp(q, ip)));
}

function sameIp(a: string, b: string): boolean {
  const [fa, va] = addr(a);
  const [fb, vb] = addr(b);
  return fa === fb && va === vb;
}

function inIpBlock(ip: string, b: IpBlock): boolean {
  return inCidr(ip, b.cidr) && !b.except.some((e) => inCidr(ip, e));
}

/** "A peer": an IP block, or the pods selected by podSelector in the namespaces selected by namespaceSelector. */
function peerHas(w: World, policy: NetworkPolicy, peer: PolicyPeer, ip: string): boolean {
  if (peer.kind === 'ipBlock') return inIpBlock(ip, peer.ipBlock);
  const pod = podAt(w, ip);
  if (pod === undefined || pod.labels === null) return false;
  if (peer.namespaceSelector === null) {
    if (pod.namespace !== policy.namespace) return false;
  } else {
    const ns = w.namespaces.find((n) => n.name === pod.namespace);
    if (ns === undefined || !labelsMatch(peer.namespaceSelector, ns.labels)) return false;
  }
  return labelsMatch(peer.podSelector, pod.labels);
}

/** "A port on the destination": a named port is the destination pod's container port of that name and protocol. */
function portHas(port: PolicyPort, dst: Pod | undefined, proto: Protocol, n: number): boolean {
  if (port.protocol !== proto) return false;
  if (port.port === undefined) return true;
  if (typeof port.port === 'number') return n >= port.port && n <= (port.endPort ?? port.port);
  const name = port.port;
  return dst?.ports.some((c) => c.name === name && c.protocol === proto && c.containerPort === n) === true;
}

function ruleAllows(
  w: World,
  policy: NetworkPolicy,
  rule: PolicyRule,
  peerIp: string,
  dst: Pod | undefined,
  proto: Protocol,
  n: number,
): boolean {
  const peerOk = rule.peers === null || rule.peers.some((p) => peerHas(w, policy, p, peerIp));
  const portOk = rule.ports === null || rule.ports.some((p) => portHas(p, dst, proto, n));
  return peerOk && portOk;
}

/** Policies of the pod's namespace that apply to it for the direction; `null` pod labels: all of them (fail closed). */
function isolating(w: World, pod: Pod, type: 'Ingress' | 'Egress'): NetworkPolicy[] {
  return w.policies.filter(
    (p) =>
      p.namespace === pod.namespace &&
      p.policyTypes.includes(type) &&
      (pod.labels === null || labelsMatch(p.podSelector, pod.labels)),
  );
}

/** Whether `dst` accepts a packet from `src` (any address) to its port `n`: its ingress policies. */
export function allowedIngress(w: World, src: string, dst: Pod, proto: Protocol, n: number): boolean {
  const policies = isolating(w, dst, 'Ingress');
  if (policies.length === 0) return true;
  if (dst.labels === null) return false;
  return policies.some((p) => p.ingress.some((r) => ruleAllows(w, p, r, src, dst, proto, n)));
}

/** Whether `src` may send a packet to `dst` (any address) port `n`: its egress policies. */
export function allowedEgress(w: World, src: Pod, dst: string, proto: Protocol, n: number): boolean {
  const policies = isolating(w, src, 'Egress');
  if (policies.length === 0) return true;
  if (src.labels === null) return false;
  return policies.some((p) => p.egress.some((r) => ruleAllows(w, p, r, dst, podAt(w, dst), proto, n)));
}
