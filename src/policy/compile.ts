/**
 * The policy compiler: policies, pods and namespaces in; for each pod of this node (not hostNetwork,
 * with addresses) what it may receive and send, per direction, out. Pure and deterministic: equal
 * inputs in any order give equal output (pods sorted by namespace and name, rules by policy and
 * index, peers lowest address first), so a backend can diff two runs.
 *
 * Semantics (networking.k8s.io/v1; decision 44 for the choices the API leaves open):
 * - a pod is isolated for a direction when a policy of its namespace selects it and lists that
 *   direction in `policyTypes`; it may then do what the union of those policies' rules allows;
 * - a rule's peers: pods matching `podSelector` in the policy's namespace, or in the namespaces
 *   matching `namespaceSelector`; `ipBlock` minus its `except`s; no peers: every address. Peer pods
 *   are pods whose Pod object has arrived (`labels` not null), not hostNetwork, with addresses; a
 *   namespace the compiler has not seen matches no `namespaceSelector`;
 * - a rule's ports: none is every port; a named port is resolved against the DESTINATION pod's
 *   container ports (name and protocol): in ingress the local pod itself, in egress each peer pod,
 *   hence one entry per distinct resolution. A destination without the name is not allowed by it;
 *   an egress named port towards an ipBlock or towards every address applies to the pods (as above)
 *   whose addresses lie in it, and to no other address;
 * - fail closed before the Pod object: a local pod with `labels: null` is isolated, with no rule,
 *   in each direction that some policy of its namespace has.
 */
import { formatIp, type IpFamily, parseIp } from '../base/ip.js';
import {
  type AddressSet,
  emptySet,
  ipBlockSet,
  normalizeRanges,
  type Range,
  rangePrefixes,
  setHas,
  unionSets,
} from './ip-block.js';
import { selectorKey, selectorMatches } from './label-selector.js';
import type {
  AllowEntry,
  CompiledRule,
  DirectionPolicy,
  LabelSelector,
  Namespace,
  NetworkPolicy,
  Pod,
  PodPolicy,
  PolicyPort,
  PolicyRule,
  PortRange,
} from './model.js';

export interface CompileInput {
  policies: readonly NetworkPolicy[];
  pods: readonly Pod[];
  namespaces: readonly Namespace[];
  /** The node whose pods are compiled (`spec.nodeName`). */
  node: string;
}

type Direction = 'ingress' | 'egress';
const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];
const TYPE: Record<Direction, 'Ingress' | 'Egress'> = { ingress: 'Ingress', egress: 'Egress' };

/** A pod that can be a peer, with its addresses parsed once. */
interface PeerPod {
  pod: Pod;
  labels: Record<string, string>;
  addrs: Addr[];
}

/** A rule's peers, independent of the local pod. */
type Peers =
  | { any: true }
  | {
      any: false;
      set: AddressSet;
      cidrs: string[];
      /** The peer pods the rule names by selector. */
      pods: PeerPod[];
      /** Whether ipBlocks widen the set beyond `pods`. */
      blocks: boolean;
    };

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sorted by protocol then first port; overlapping or adjacent ranges of a protocol merged. */
export function normalizePorts(ranges: readonly PortRange[]): PortRange[] {
  const sorted = [...ranges].sort((a, b) => compareText(a.protocol, b.protocol) || a.first - b.first);
  const out: PortRange[] = [];
  for (const r of sorted) {
    const prev = out[out.length - 1];
    if (prev !== undefined && prev.protocol === r.protocol && r.first <= prev.last + 1) {
      if (r.last > prev.last) prev.last = r.last;
    } else {
      out.push({ ...r });
    }
  }
  return out;
}

function numericRange(p: PolicyPort): PortRange | undefined {
  if (p.port === undefined) return { protocol: p.protocol, first: 0, last: 65535 };
  if (typeof p.port === 'number') return { protocol: p.protocol, first: p.port, last: p.endPort ?? p.port };
  return undefined;
}

/** What the named ports of `ports` mean on `pod` (its container ports of that name and protocol). */
function resolveNamed(ports: readonly PolicyPort[], pod: Pod): PortRange[] {
  const out: PortRange[] = [];
  for (const p of ports) {
    if (typeof p.port !== 'string') continue;
    for (const c of pod.ports) {
      if (c.name === p.port && c.protocol === p.protocol) {
        out.push({ protocol: p.protocol, first: c.containerPort, last: c.containerPort });
      }
    }
  }
  return out;
}

type Addr = { family: IpFamily; value: bigint };

function addressSetOf(addrs: readonly Addr[]): AddressSet {
  const set = emptySet();
  const r4: Range[] = [];
  const r6: Range[] = [];
  for (const a of addrs) (a.family === 4 ? r4 : r6).push([a.value, a.value]);
  set[4] = normalizeRanges(r4);
  set[6] = normalizeRanges(r6);
  return set;
}

/**
 * The CIDRs of ipBlocks (`blocks`, minimal) and of pod addresses (each a /32 or /128 of its own, left
 * out when a block covers it): disjoint, IPv4 first, each family lowest first.
 */
function peerCidrs(blocks: AddressSet, addrs: readonly Addr[]): string[] {
  const items: Array<{ family: IpFamily; value: bigint; text: string }> = [];
  for (const family of [4, 6] as const) {
    for (const [first, last] of blocks[family]) {
      for (const p of rangePrefixes(family, first, last))
        items.push({ family, value: p.network, text: p.text });
    }
  }
  const seen = new Set<string>();
  for (const a of addrs) {
    if (setHas(blocks, a.family, a.value)) continue;
    const text = `${formatIp(a.family, a.value)}/${a.family === 4 ? 32 : 128}`;
    if (seen.has(text)) continue;
    seen.add(text);
    items.push({ family: a.family, value: a.value, text });
  }
  items.sort((a, b) => a.family - b.family || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
  return items.map((i) => i.text);
}

class Compiler {
  readonly #nsLabels = new Map<string, Record<string, string>>();
  readonly #peerPods: PeerPod[] = [];
  readonly #peerPodsByNs = new Map<string, PeerPod[]>();
  readonly #policiesByNs = new Map<string, NetworkPolicy[]>();
  readonly #nsMatches = new Map<string, string[]>();
  readonly #podMatches = new Map<string, PeerPod[]>();
  readonly #peers = new Map<string, Peers>();
  readonly #egressRules = new Map<string, CompiledRule>();

  constructor(input: CompileInput) {
    for (const ns of input.namespaces) this.#nsLabels.set(ns.name, ns.labels);
    for (const pod of input.pods) {
      if (pod.labels === null || pod.hostNetwork || pod.ips.length === 0) continue;
      const addrs = pod.ips.flatMap((ip) => {
        const v = parseIp(ip);
        return v === undefined ? [] : [v];
      });
      const peer: PeerPod = { pod, labels: pod.labels, addrs };
      this.#peerPods.push(peer);
      const list = this.#peerPodsByNs.get(pod.namespace);
      if (list === undefined) this.#peerPodsByNs.set(pod.namespace, [peer]);
      else list.push(peer);
    }
    const sorted = [...input.policies].sort(
      (a, b) => compareText(a.namespace, b.namespace) || compareText(a.name, b.name),
    );
    for (const policy of sorted) {
      const list = this.#policiesByNs.get(policy.namespace);
      if (list === undefined) this.#policiesByNs.set(policy.namespace, [policy]);
      else list.push(policy);
    }
  }

  /** Namespaces (seen) that `selector` selects, sorted. */
  #namespacesMatching(selector: LabelSelector): string[] {
    const key = selectorKey(selector);
    let names = this.#nsMatches.get(key);
    if (names === undefined) {
      names = [...this.#nsLabels]
        .filter(([, labels]) => selectorMatches(selector, labels))
        .map(([name]) => name)
        .sort(compareText);
      this.#nsMatches.set(key, names);
    }
    return names;
  }

  /** Peer pods of `namespace` that `selector` selects. */
  #podsMatching(namespace: string, selector: LabelSelector): PeerPod[] {
    const key = `${namespace}\0${selectorKey(selector)}`;
    let pods = this.#podMatches.get(key);
    if (pods === undefined) {
      pods = (this.#peerPodsByNs.get(namespace) ?? []).filter((p) => selectorMatches(selector, p.labels));
      this.#podMatches.set(key, pods);
    }
    return pods;
  }

  #rulePeers(policy: NetworkPolicy, rule: PolicyRule, id: string): Peers {
    let peers = this.#peers.get(id);
    if (peers !== undefined) return peers;
    if (rule.peers === null) {
      peers = { any: true };
    } else {
      const sets: AddressSet[] = [];
      const pods = new Set<PeerPod>();
      let blocks = false;
      for (const peer of rule.peers) {
        if (peer.kind === 'ipBlock') {
          sets.push(ipBlockSet(peer.ipBlock));
          blocks = true;
          continue;
        }
        const namespaces =
          peer.namespaceSelector === null
            ? [policy.namespace]
            : this.#namespacesMatching(peer.namespaceSelector);
        for (const ns of namespaces) for (const p of this.#podsMatching(ns, peer.podSelector)) pods.add(p);
      }
      const podList = [...pods];
      const addrs = podList.flatMap((p) => p.addrs);
      const blockSet = unionSets(sets);
      const set = unionSets([blockSet, addressSetOf(addrs)]);
      peers = { any: false, set, cidrs: peerCidrs(blockSet, addrs), pods: podList, blocks };
    }
    this.#peers.set(id, peers);
    return peers;
  }

  /** An egress rule does not depend on the local pod: compiled once for every pod it applies to. */
  #egressRule(policy: NetworkPolicy, rule: PolicyRule, id: string): CompiledRule {
    let compiled = this.#egressRules.get(id);
    if (compiled !== undefined) return compiled;
    const peers = this.#rulePeers(policy, rule, id);
    const entries: AllowEntry[] = [];
    const peerList: AllowEntry['peers'] = peers.any ? 'any' : peers.cidrs;
    if (rule.ports === null) {
      entries.push({ peers: peerList, ports: 'any' });
    } else {
      const numeric = normalizePorts(rule.ports.flatMap((p) => numericRange(p) ?? []));
      if (numeric.length > 0) entries.push({ peers: peerList, ports: numeric });
      if (rule.ports.some((p) => typeof p.port === 'string')) {
        entries.push(...this.#namedEgress(rule.ports, peers));
      }
    }
    compiled = { id, entries: entries.filter((e) => e.peers.length > 0) };
    this.#egressRules.set(id, compiled);
    return compiled;
  }

  /** Each destination pod's meaning of the rule's named ports, grouped by meaning. */
  #namedEgress(ports: readonly PolicyPort[], peers: Peers): AllowEntry[] {
    const candidates = peers.any || peers.blocks ? this.#peerPods : peers.pods;
    const groups = new Map<string, { ports: PortRange[]; addrs: Addr[] }>();
    for (const p of candidates) {
      const addrs = peers.any ? p.addrs : p.addrs.filter((a) => setHas(peers.set, a.family, a.value));
      if (addrs.length === 0) continue;
      const resolved = normalizePorts(resolveNamed(ports, p.pod));
      if (resolved.length === 0) continue;
      const key = JSON.stringify(resolved);
      const group = groups.get(key);
      if (group === undefined) groups.set(key, { ports: resolved, addrs: [...addrs] });
      else group.addrs.push(...addrs);
    }
    return [...groups]
      .sort(([a], [b]) => compareText(a, b))
      .map(([, g]) => ({ peers: peerCidrs(emptySet(), g.addrs), ports: g.ports }));
  }

  /** An ingress rule for one local pod: its named ports are the local pod's. */
  #ingressRule(policy: NetworkPolicy, rule: PolicyRule, id: string, local: Pod): CompiledRule {
    const peers = this.#rulePeers(policy, rule, id);
    const peerList: AllowEntry['peers'] = peers.any ? 'any' : peers.cidrs;
    if (peerList.length === 0) return { id, entries: [] };
    if (rule.ports === null) return { id, entries: [{ peers: peerList, ports: 'any' }] };
    const ports = normalizePorts([
      ...rule.ports.flatMap((p) => numericRange(p) ?? []),
      ...resolveNamed(rule.ports, local),
    ]);
    return { id, entries: ports.length === 0 ? [] : [{ peers: peerList, ports }] };
  }

  #direction(pod: Pod, direction: Direction): DirectionPolicy | null {
    const policies = (this.#policiesByNs.get(pod.namespace) ?? []).filter((p) =>
      p.policyTypes.includes(TYPE[direction]),
    );
    if (pod.labels === null) {
      // Fail closed until the Pod object arrives: every policy of the namespace might select it.
      if (policies.length === 0) return null;
      return { policies: policies.map((p) => `${p.namespace}/${p.name}`), rules: [] };
    }
    const labels = pod.labels;
    const selecting = policies.filter((p) => selectorMatches(p.podSelector, labels));
    if (selecting.length === 0) return null;
    const rules: CompiledRule[] = [];
    for (const policy of selecting) {
      for (const [i, rule] of policy[direction].entries()) {
        const id = `${policy.namespace}/${policy.name}/${direction}/${i}`;
        rules.push(
          direction === 'egress'
            ? this.#egressRule(policy, rule, id)
            : this.#ingressRule(policy, rule, id, pod),
        );
      }
    }
    return { policies: selecting.map((p) => `${p.namespace}/${p.name}`), rules };
  }

  compile(pods: readonly Pod[], node: string): PodPolicy[] {
    const local = pods
      .filter((p) => p.node === node && !p.hostNetwork && p.ips.length > 0)
      .sort((a, b) => compareText(a.namespace, b.namespace) || compareText(a.name, b.name));
    return local.map((pod) => {
      const [ingress, egress] = DIRECTIONS.map((d) => this.#direction(pod, d)) as [
        DirectionPolicy | null,
        DirectionPolicy | null,
      ];
      return { namespace: pod.namespace, name: pod.name, ips: [...pod.ips], ingress, egress };
    });
  }
}

/**
 * Each local pod's allowed peers and ports per direction. The returned objects share arrays between
 * pods (a rule compiled once is every pod's): treat them as read-only.
 */
export function compilePolicies(input: CompileInput): PodPolicy[] {
  return new Compiler(input).compile(input.pods, input.node);
}
