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
import { type AddressSet, ipBlockSet, rangePrefixes, unionSets } from './ip-block.js';
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

/** A pod that can be a peer, with its addresses' ranks in the compiler's address index. */
interface PeerPod {
  pod: Pod;
  labels: Record<string, string>;
  ranks: number[];
}

/**
 * Every peer pod address, sorted (IPv4 first, then by value); a rank is a position here, so sets of
 * pod addresses are sorted number arrays and come out sorted without comparing bigints again.
 */
interface AddressIndex {
  family: IpFamily[];
  value: bigint[];
  /** `ADDRESS/32` or `ADDRESS/128`. */
  cidr: string[];
  owner: PeerPod[];
}

/** A rule's peers, independent of the local pod. */
type Peers =
  | { any: true }
  | {
      any: false;
      cidrs: string[];
      /** Ranks of the pod addresses in the peers: named pods' and those inside the ipBlocks. */
      ranks: number[];
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

function compareAddr(fa: IpFamily, va: bigint, fb: IpFamily, vb: bigint): number {
  return fa - fb || (va < vb ? -1 : va > vb ? 1 : 0);
}

/** Sorted, duplicates removed. */
function uniqueSorted(ranks: number[]): number[] {
  ranks.sort((a, b) => a - b);
  let n = 0;
  for (let i = 0; i < ranks.length; i++)
    if (i === 0 || ranks[i] !== ranks[i - 1]) ranks[n++] = ranks[i] as number;
  ranks.length = n;
  return ranks;
}

/**
 * Compiled rules carried from an earlier run (incremental-compile.ts): rules that the changes since
 * cannot have touched. Keys as the compiler's caches have them.
 */
export interface CompiledRules {
  /** Egress rules by id. */
  egress: Map<string, CompiledRule>;
  /** Ingress rules by `ID\0RESOLUTION` (the local pod's meaning of the rule's named ports). */
  ingress: Map<string, CompiledRule>;
}

export class Compiler {
  readonly #nsLabels = new Map<string, Record<string, string>>();
  readonly #index: AddressIndex = { family: [], value: [], cidr: [], owner: [] };
  readonly #peerPods: PeerPod[] = [];
  readonly #peerPodsByNs = new Map<string, PeerPod[]>();
  readonly #policiesByNs = new Map<string, NetworkPolicy[]>();
  readonly #nsMatches = new Map<string, string[]>();
  readonly #podMatches = new Map<string, PeerPod[]>();
  readonly #peers = new Map<string, Peers>();
  readonly #egressRules: Map<string, CompiledRule>;
  /** Per list of named ports (by key), each pod's resolution and its key. */
  readonly #resolved = new Map<string, Map<Pod, { key: string; ranges: PortRange[] }>>();
  /** Per ingress rule and resolution of its named ports on the local pod: the compiled rule, shared. */
  readonly #ingressRules: Map<string, CompiledRule>;
  /** Addresses (canonical text) that two or more peer pods claim. */
  readonly duplicates = new Set<string>();

  constructor(input: CompileInput, reuse?: CompiledRules) {
    this.#egressRules = reuse?.egress ?? new Map();
    this.#ingressRules = reuse?.ingress ?? new Map();
    for (const ns of input.namespaces) this.#nsLabels.set(ns.name, ns.labels);
    const addrs: Array<{ family: IpFamily; value: bigint; text: string; owner: PeerPod }> = [];
    for (const pod of input.pods) {
      if (pod.labels === null || pod.hostNetwork || pod.ips.length === 0) continue;
      const peer: PeerPod = { pod, labels: pod.labels, ranks: [] };
      for (const ip of pod.ips) {
        const v = parseIp(ip);
        if (v === undefined) continue;
        addrs.push({
          ...v,
          text: `${formatIp(v.family, v.value)}/${v.family === 4 ? 32 : 128}`,
          owner: peer,
        });
      }
      this.#peerPods.push(peer);
      const list = this.#peerPodsByNs.get(pod.namespace);
      if (list === undefined) this.#peerPodsByNs.set(pod.namespace, [peer]);
      else list.push(peer);
    }
    addrs.sort(
      (a, b) =>
        compareAddr(a.family, a.value, b.family, b.value) ||
        compareText(a.owner.pod.namespace, b.owner.pod.namespace) ||
        compareText(a.owner.pod.name, b.owner.pod.name),
    );
    for (const a of addrs) {
      // Two pods with one address (a stale status): the address is one peer, owned by the first by
      // namespace and name, whatever the input order.
      const last = this.#index.value.length - 1;
      if (last >= 0 && this.#index.family[last] === a.family && this.#index.value[last] === a.value) {
        a.owner.ranks.push(last);
        this.duplicates.add(formatIp(a.family, a.value));
        continue;
      }
      a.owner.ranks.push(this.#index.value.length);
      this.#index.family.push(a.family);
      this.#index.value.push(a.value);
      this.#index.cidr.push(a.text);
      this.#index.owner.push(a.owner);
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

  /** The first rank whose address is not below (family, value). */
  #lowerBound(family: IpFamily, value: bigint): number {
    let lo = 0;
    let hi = this.#index.value.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (
        compareAddr(this.#index.family[mid] as IpFamily, this.#index.value[mid] as bigint, family, value) < 0
      ) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  #rulePeers(policy: NetworkPolicy, rule: PolicyRule, id: string): Peers {
    let peers = this.#peers.get(id);
    if (peers !== undefined) return peers;
    if (rule.peers === null) {
      peers = { any: true };
    } else {
      const sets: AddressSet[] = [];
      const podRanks: number[] = [];
      for (const peer of rule.peers) {
        if (peer.kind === 'ipBlock') {
          sets.push(ipBlockSet(peer.ipBlock));
          continue;
        }
        const namespaces =
          peer.namespaceSelector === null
            ? [policy.namespace]
            : this.#namespacesMatching(peer.namespaceSelector);
        for (const ns of namespaces)
          for (const p of this.#podsMatching(ns, peer.podSelector)) podRanks.push(...p.ranks);
      }
      const blocks = unionSets(sets);
      // Block prefixes and the pod addresses outside every block, merged in address order.
      const cidrs: string[] = [];
      const inBlocks: number[] = [];
      const outside = uniqueSorted(podRanks);
      let o = 0;
      for (const family of [4, 6] as const) {
        for (const [first, last] of blocks[family]) {
          const lo = this.#lowerBound(family, first);
          while (o < outside.length && (outside[o] as number) < lo)
            cidrs.push(this.#index.cidr[outside[o++] as number] as string);
          for (const p of rangePrefixes(family, first, last)) cidrs.push(p.text);
          // Pod addresses inside the block: peers for named ports, not listed again.
          let r = lo;
          for (; r < this.#index.value.length; r++) {
            if (this.#index.family[r] !== family || (this.#index.value[r] as bigint) > last) break;
            inBlocks.push(r);
          }
          while (o < outside.length && (outside[o] as number) < r) o++;
        }
      }
      while (o < outside.length) cidrs.push(this.#index.cidr[outside[o++] as number] as string);
      peers = {
        any: false,
        cidrs,
        ranks: inBlocks.length === 0 ? outside : uniqueSorted([...outside, ...inBlocks]),
      };
    }
    this.#peers.set(id, peers);
    return peers;
  }

  /**
   * What the named ports of `ports` mean on a pod: a function of the pod, cached per list of named
   * ports and pod (rules share lists like `[http]`, and each pod resolves once per list).
   */
  #resolver(ports: readonly PolicyPort[]): (pod: Pod) => { key: string; ranges: PortRange[] } {
    const named = ports.filter((p) => typeof p.port === 'string');
    const listKey = JSON.stringify(named.map((p) => [p.protocol, p.port]));
    let byPod = this.#resolved.get(listKey);
    if (byPod === undefined) {
      byPod = new Map();
      this.#resolved.set(listKey, byPod);
    }
    const cache = byPod;
    return (pod) => {
      let r = cache.get(pod);
      if (r === undefined) {
        const ranges = normalizePorts(resolveNamed(named, pod));
        r = { key: ranges.length === 0 ? '' : JSON.stringify(ranges), ranges };
        cache.set(pod, r);
      }
      return r;
    };
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
    const groups = new Map<string, { ports: PortRange[]; cidrs: string[] }>();
    const count = peers.any ? this.#index.value.length : peers.ranks.length;
    const resolve = this.#resolver(ports);
    for (let i = 0; i < count; i++) {
      // Ranks ascend, so each group's addresses come out in address order.
      const rank = peers.any ? i : (peers.ranks[i] as number);
      const owner = this.#index.owner[rank] as PeerPod;
      const resolved = resolve(owner.pod);
      if (resolved.key === '') continue;
      const group = groups.get(resolved.key);
      const cidr = this.#index.cidr[rank] as string;
      if (group === undefined) groups.set(resolved.key, { ports: resolved.ranges, cidrs: [cidr] });
      else group.cidrs.push(cidr);
    }
    return [...groups]
      .sort(([a], [b]) => compareText(a, b))
      .map(([, g]) => ({ peers: g.cidrs, ports: g.ports }));
  }

  /** An ingress rule for one local pod: its named ports are the local pod's. */
  #ingressRule(policy: NetworkPolicy, rule: PolicyRule, id: string, local: Pod): CompiledRule {
    const named = rule.ports?.some((p) => typeof p.port === 'string') === true;
    const resolved =
      named && rule.ports !== null ? this.#resolver(rule.ports)(local) : { key: '', ranges: [] };
    const cacheKey = `${id}\0${resolved.key}`;
    let compiled = this.#ingressRules.get(cacheKey);
    if (compiled !== undefined) return compiled;
    const peers = this.#rulePeers(policy, rule, id);
    const peerList: AllowEntry['peers'] = peers.any ? 'any' : peers.cidrs;
    if (peerList.length === 0) {
      compiled = { id, entries: [] };
    } else if (rule.ports === null) {
      compiled = { id, entries: [{ peers: peerList, ports: 'any' }] };
    } else {
      const ports = normalizePorts([...rule.ports.flatMap((p) => numericRange(p) ?? []), ...resolved.ranges]);
      compiled = { id, entries: ports.length === 0 ? [] : [{ peers: peerList, ports }] };
    }
    this.#ingressRules.set(cacheKey, compiled);
    return compiled;
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

  /** What one local pod may receive and send. */
  compilePod(pod: Pod): PodPolicy {
    const [ingress, egress] = DIRECTIONS.map((d) => this.#direction(pod, d)) as [
      DirectionPolicy | null,
      DirectionPolicy | null,
    ];
    return { namespace: pod.namespace, name: pod.name, ips: [...pod.ips], ingress, egress };
  }

  /** The rules compiled so far, for a later run to carry what it may. */
  rules(): CompiledRules {
    return { egress: this.#egressRules, ingress: this.#ingressRules };
  }
}

/** The pods of `node` that policy applies to (not hostNetwork, with addresses), by namespace and name. */
export function localPods(pods: readonly Pod[], node: string): Pod[] {
  return pods
    .filter((p) => p.node === node && !p.hostNetwork && p.ips.length > 0)
    .sort((a, b) => compareText(a.namespace, b.namespace) || compareText(a.name, b.name));
}

/**
 * Each local pod's allowed peers and ports per direction. The returned objects share arrays between
 * pods (a rule compiled once is every pod's): treat them as read-only.
 */
export function compilePolicies(input: CompileInput): PodPolicy[] {
  const compiler = new Compiler(input);
  return localPods(input.pods, input.node).map((pod) => compiler.compilePod(pod));
}
