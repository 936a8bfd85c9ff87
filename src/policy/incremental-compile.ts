/**
 * The policy compiler run after run (decision 54): each run compiles only what the changes since the
 * previous run can have touched, and gives every other local pod the very `PodPolicy` object of the
 * previous run. The output always equals `compilePolicies` of the same input (the property test
 * holds it to that); only the work differs.
 *
 * What a compiled rule depends on, and so what a change touches:
 * - a rule's peers: the peer pods (labels set, not hostNetwork, with addresses) that its pod peers
 *   select, in the namespaces their `namespaceSelector` selects; an egress rule with named ports
 *   towards an ipBlock or every address also reads the addresses and container ports of every peer
 *   pod in it. A pod that changed (added, gone, or any field) touches the rules whose selectors match
 *   it before or after the change; one whose addresses, ports or being a peer at all changed also
 *   touches the egress rules with named ports towards every address, or towards an ipBlock that
 *   holds one of its addresses before or after;
 * - a namespace that changed touches every rule with a `namespaceSelector`;
 * - a policy that changed touches its own rules (before and after), and the selection of every
 *   local pod of its namespace.
 * A local pod is compiled again when it changed, when a policy of its namespace changed, or when one
 * of its rules was touched; otherwise its previous output stands.
 *
 * Falls back to a whole compile (same output, all the work): on the first run, when the node
 * changes, when two pods or two policies share a key, when a changed pod holds an address that
 * another pod also claims (which pod owns it is an order of the whole input), and when more changed
 * than an incremental run would save.
 */
import { formatIp, parseIp } from '../base/ip.js';
import { type CompiledRules, type CompileInput, Compiler, localPods } from './compile.js';
import { type AddressSet, ipBlockSet, setHas } from './ip-block.js';
import { selectorMatches } from './label-selector.js';
import type { IpBlock, Namespace, NetworkPolicy, Pod, PodPolicy, PolicyRule } from './model.js';
import { contentHash } from './pod-signature.js';

/** More changed objects than this: a whole compile costs less than finding what they touched. */
const MAX_CHANGES = 100;

interface Run {
  node: string;
  pods: Map<string, Pod>;
  policies: Map<string, NetworkPolicy>;
  namespaces: Map<string, Namespace>;
  rules: CompiledRules;
  out: Map<string, PodPolicy>;
  /** Addresses two or more peer pods claimed. */
  duplicates: Set<string>;
}

export interface IncrementalCompileStats {
  /** Runs that compiled everything, and why the last one did. */
  whole: number;
  lastWholeReason: string;
  incremental: number;
  /** Local pods compiled again, and kept as they were, over all incremental runs. */
  podsCompiled: number;
  podsKept: number;
}

const objectKey = (o: { namespace: string; name: string }): string => `${o.namespace}/${o.name}`;

function keyed<T>(items: readonly T[], key: (t: T) => string): Map<string, T> | undefined {
  const m = new Map<string, T>();
  for (const item of items) {
    const k = key(item);
    if (m.has(k)) return undefined;
    m.set(k, item);
  }
  return m;
}

function sameLabels(a: Record<string, string> | null, b: Record<string, string> | null): boolean {
  if (a === b) return true;
  if (a === null || b === null) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

function sameList<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean): boolean {
  return a === b || (a.length === b.length && a.every((x, i) => same(x, b[i] as T)));
}

export function samePod(a: Pod, b: Pod): boolean {
  return (
    a === b ||
    (a.namespace === b.namespace &&
      a.name === b.name &&
      a.node === b.node &&
      a.hostNetwork === b.hostNetwork &&
      sameLabels(a.labels, b.labels) &&
      sameList(a.ips, b.ips, (x, y) => x === y) &&
      sameList(
        a.ports,
        b.ports,
        (x, y) => x.name === y.name && x.containerPort === y.containerPort && x.protocol === y.protocol,
      ))
  );
}

const samePolicy = (a: NetworkPolicy, b: NetworkPolicy): boolean =>
  a === b || contentHash(a) === contentHash(b);

const sameNamespace = (a: Namespace, b: Namespace): boolean =>
  a === b || (a.name === b.name && sameLabels(a.labels, b.labels));

/** Keys whose object was added, removed or changed. */
function changedKeys<T>(
  before: Map<string, T>,
  after: Map<string, T>,
  same: (a: T, b: T) => boolean,
): string[] {
  const out: string[] = [];
  for (const [k, a] of after) {
    const b = before.get(k);
    if (b === undefined || !same(b, a)) out.push(k);
  }
  for (const k of before.keys()) if (!after.has(k)) out.push(k);
  return out;
}

const DIRECTIONS = ['ingress', 'egress'] as const;

function ruleId(policy: NetworkPolicy, direction: 'ingress' | 'egress', index: number): string {
  return `${policy.namespace}/${policy.name}/${direction}/${index}`;
}

function* rulesOf(
  policy: NetworkPolicy,
): Generator<{ id: string; direction: 'ingress' | 'egress'; rule: PolicyRule }> {
  for (const direction of DIRECTIONS)
    for (const [i, rule] of policy[direction].entries())
      yield { id: ruleId(policy, direction, i), direction, rule };
}

const hasNamedPorts = (rule: PolicyRule): boolean =>
  rule.ports?.some((p) => typeof p.port === 'string') === true;

const isPeer = (p: Pod): p is Pod & { labels: Record<string, string> } =>
  p.labels !== null && !p.hostNetwork && p.ips.length > 0;

/** Whether a pod's change can matter to a rule that reads its addresses and ports (not its labels). */
function addressingChanged(before: Pod | undefined, after: Pod | undefined): boolean {
  if (before === undefined || after === undefined) return true;
  return (
    isPeer(before) !== isPeer(after) ||
    !sameList(before.ips, after.ips, (x, y) => x === y) ||
    !sameList(
      before.ports,
      after.ports,
      (x, y) => x.name === y.name && x.containerPort === y.containerPort && x.protocol === y.protocol,
    )
  );
}

const blockSets = new WeakMap<IpBlock, AddressSet>();

function inBlock(block: IpBlock, ip: string): boolean {
  let set = blockSets.get(block);
  if (set === undefined) {
    set = ipBlockSet(block);
    blockSets.set(block, set);
  }
  const v = parseIp(ip);
  return v !== undefined && setHas(set, v.family, v.value);
}

function canonical(ip: string): string {
  const v = parseIp(ip);
  return v === undefined ? ip : formatIp(v.family, v.value);
}

/** Whether a rule's compiled form can have changed with these pods (before and after) and namespaces. */
function touches(
  policy: NetworkPolicy,
  direction: 'ingress' | 'egress',
  rule: PolicyRule,
  namespacesChanged: boolean,
  addressing: readonly Pod[],
  peerVersions: ReadonlyArray<Pod & { labels: Record<string, string> }>,
  namespaces: Map<string, Namespace>,
): boolean {
  if (direction === 'egress' && hasNamedPorts(rule) && addressing.length > 0) {
    // Named ports towards addresses: the peer pods inside them are destinations whose ports count.
    if (rule.peers === null) return true;
    for (const peer of rule.peers) {
      if (peer.kind === 'ipBlock' && addressing.some((p) => p.ips.some((ip) => inBlock(peer.ipBlock, ip))))
        return true;
    }
  }
  if (rule.peers === null) return false;
  for (const peer of rule.peers) {
    if (peer.kind !== 'pods') continue;
    const nsSelector = peer.namespaceSelector;
    if (nsSelector !== null && namespacesChanged) return true;
    for (const v of peerVersions) {
      if (nsSelector === null) {
        if (v.namespace !== policy.namespace) continue;
      } else {
        const labels = namespaces.get(v.namespace)?.labels;
        if (labels === undefined || !selectorMatches(nsSelector, labels)) continue;
      }
      if (selectorMatches(peer.podSelector, v.labels)) return true;
    }
  }
  return false;
}

export class IncrementalCompiler {
  #last: Run | undefined;
  readonly #stats: IncrementalCompileStats = {
    whole: 0,
    lastWholeReason: '',
    incremental: 0,
    podsCompiled: 0,
    podsKept: 0,
  };

  get stats(): Readonly<IncrementalCompileStats> {
    return this.#stats;
  }

  /** Forgets the previous run: the next one compiles everything. */
  reset(): void {
    this.#last = undefined;
  }

  /** Each local pod's allowed peers and ports per direction, as `compilePolicies` gives them. */
  compile(input: CompileInput): PodPolicy[] {
    const pods = keyed(input.pods, objectKey);
    const policies = keyed(input.policies, objectKey);
    const namespaces = keyed(input.namespaces, (n) => n.name);
    if (!pods || !policies || !namespaces) {
      this.#last = undefined;
      return this.#whole(input, undefined, 'two objects share a key');
    }
    const next = { node: input.node, pods, policies, namespaces };
    const last = this.#last;
    if (last === undefined) return this.#whole(input, next, 'first run');
    if (last.node !== input.node) return this.#whole(input, next, 'node changed');
    const changedPods = changedKeys(last.pods, pods, samePod);
    const changedPolicies = changedKeys(last.policies, policies, samePolicy);
    const changedNamespaces = changedKeys(last.namespaces, namespaces, sameNamespace);
    if (changedPods.length + changedPolicies.length + changedNamespaces.length > MAX_CHANGES) {
      return this.#whole(input, next, 'many changes');
    }

    // The changed pods before and after, as peers.
    const versions: Pod[] = [];
    /** Of those, the ones whose addresses, ports or being a peer changed. */
    const addressing: Pod[] = [];
    for (const k of changedPods) {
      const pair = [last.pods.get(k), pods.get(k)];
      const moved = addressingChanged(...(pair as [Pod | undefined, Pod | undefined]));
      for (const p of pair) {
        if (p === undefined) continue;
        versions.push(p);
        if (moved) addressing.push(p);
      }
    }
    const touched = new Set<string>();
    const policyNamespaces = new Set<string>();
    for (const k of changedPolicies) {
      for (const p of [last.policies.get(k), policies.get(k)]) {
        if (p === undefined) continue;
        policyNamespaces.add(p.namespace);
        for (const { id } of rulesOf(p)) touched.add(id);
      }
    }
    const peerVersions = versions.filter(isPeer);
    for (const policy of policies.values()) {
      for (const { id, direction, rule } of rulesOf(policy)) {
        if (touched.has(id)) continue;
        if (
          touches(policy, direction, rule, changedNamespaces.length > 0, addressing, peerVersions, namespaces)
        ) {
          touched.add(id);
        }
      }
    }

    const compiler = new Compiler(input, {
      egress: new Map([...last.rules.egress].filter(([id]) => !touched.has(id))),
      ingress: new Map([...last.rules.ingress].filter(([key]) => !touched.has(key.split('\0')[0] as string))),
    });
    // Which pod owns a shared address is an order over the whole input: not followed here.
    const shared = (p: Pod) =>
      p.ips.some((ip) => last.duplicates.has(canonical(ip)) || compiler.duplicates.has(canonical(ip)));
    if (versions.some(shared)) return this.#whole(input, next, 'a changed pod shares an address');

    const changed = new Set(changedPods);
    const out = new Map<string, PodPolicy>();
    const result = localPods(input.pods, input.node).map((pod) => {
      const key = objectKey(pod);
      const before = last.out.get(key);
      let policy: PodPolicy;
      if (
        before !== undefined &&
        !changed.has(key) &&
        !policyNamespaces.has(pod.namespace) &&
        ![before.ingress, before.egress].some((d) => d?.rules.some((r) => touched.has(r.id)))
      ) {
        policy = before;
        this.#stats.podsKept++;
      } else {
        policy = compiler.compilePod(pod);
        this.#stats.podsCompiled++;
      }
      out.set(key, policy);
      return policy;
    });
    this.#stats.incremental++;
    this.#last = { ...next, rules: compiler.rules(), out, duplicates: compiler.duplicates };
    return result;
  }

  #whole(
    input: CompileInput,
    next: Omit<Run, 'rules' | 'out' | 'duplicates'> | undefined,
    reason: string,
  ): PodPolicy[] {
    const compiler = new Compiler(input);
    const out = new Map<string, PodPolicy>();
    const result = localPods(input.pods, input.node).map((pod) => {
      const policy = compiler.compilePod(pod);
      out.set(objectKey(pod), policy);
      return policy;
    });
    this.#stats.whole++;
    this.#stats.lastWholeReason = reason;
    this.#last = next && { ...next, rules: compiler.rules(), out, duplicates: compiler.duplicates };
    return result;
  }
}
