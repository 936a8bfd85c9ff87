/**
 * policy-flows.ts's flows kept from apply to apply (decision 54's next step): each pod's share of the
 * flows (its drops and allow-alls, its counting flows, its addresses as clause 1 of its conjunctions)
 * and each conjunction's own clauses (peers, ports) are remembered, so a build works only on the pods
 * whose `PodPolicy` object changed (the incremental compiler hands an unchanged pod the previous
 * object) and says which flows to add and which to remove. After every build the flows are those
 * `policyFlows` gives for the same pods with the same conjunction ids (the property test holds it to
 * that).
 *
 * Two things of `policyFlows` are orders over the whole input, which a per-pod builder does not
 * follow: which of two pods with one address gets the address's flows, and which of two pods under
 * one rule entry with different peers keeps the conjunction's plain key. The compiler gives neither
 * (addresses are unique but for stale objects; a rule's peers are every pod's), so when either
 * happens the builder starts over from nothing (`rebuilt`; the same output, all the work).
 */
import {
  type ConjunctionIds,
  type CounterKey,
  clauseFlow,
  countingFlow,
  type PlainFlow,
  type PolicyNode,
  plainFlowText,
  plainIdentity,
  podFlowParts,
  policyBaseFlows,
  policyFlows,
} from './policy-flows.js';

/** One pod's share. */
interface PodShare {
  policy: PodPolicyRef;
  /** Identities of its plain and counting flows. */
  plain: string[];
  /** Conjunction keys it is a member of, with the clause-1 matches it put there. */
  members: Array<{ conj: string; matches: string[] }>;
  cookies: bigint[];
  /** Every id key it uses (deny and entry keys), for `ConjunctionIds.retain`. */
  keys: string[];
}

type PodPolicyRef = Parameters<typeof podFlowParts>[1];

interface Conj {
  id: number;
  n: number;
  peersKey: string;
  table: number;
  /** Its clauses 2..n: (match, action). */
  clauses: Array<[string, string]>;
  /** Clause-1 matches and how many pods put each there. */
  members: Map<string, number>;
}

/** One clause flow: every conjunction action on one (table, match), each counted. */
interface Clause {
  table: number;
  match: string;
  actions: Map<string, number>;
}

/** Raised inside a build when the input needs `policyFlows`' whole-input order. */
class NeedsWhole extends Error {}

export interface FlowChange {
  add: string[];
  remove: string[];
}

export class PolicyFlowBuilder {
  readonly #ids: ConjunctionIds;
  #pods = new Map<string, PodShare>();
  #conjs = new Map<string, Conj>();
  #clauses = new Map<string, Clause>();
  #plain = new Map<string, string>();
  #base: string[] = [];
  #counters = new Map<bigint, CounterKey>();
  /** Conjunctions whose last member left during this build. */
  #orphans = new Set<string>();
  /** Flow texts as they were before this build, by what they are (plain identity or clause id). */
  #dirty = new Map<string, string | undefined>();
  /** The flows of the last build when it took `policyFlows` whole (no per-pod state then). */
  #whole: string[] | undefined;
  /** Builds that took `policyFlows` whole (an order over the whole input was needed). */
  rebuilt = 0;

  constructor(ids: ConjunctionIds) {
    this.#ids = ids;
  }

  /** Every flow now, base flows first. */
  all(): string[] {
    if (this.#whole !== undefined) return this.#whole;
    const out = [...this.#base, ...this.#plain.values()];
    for (const c of this.#clauses.values()) out.push(clauseText(c));
    return out;
  }

  /** What each counting cookie counts now. */
  counters(): Map<bigint, CounterKey> {
    return this.#counters;
  }

  /** Forgets everything: the next build starts from nothing. */
  reset(): void {
    this.#pods = new Map();
    this.#conjs = new Map();
    this.#clauses = new Map();
    this.#plain = new Map();
    this.#base = [];
    this.#counters = new Map();
    this.#dirty = new Map();
    this.#orphans = new Set();
    this.#whole = undefined;
  }

  /**
   * Makes the builder's flows those of `pods` and returns what changed. Bad input (a pod given twice)
   * throws before anything changes.
   */
  build(node: PolicyNode, pods: readonly PodPolicyRef[]): FlowChange {
    const next = new Map<string, PodPolicyRef>();
    for (const p of pods) {
      const key = `${p.namespace}/${p.name}`;
      if (next.has(key)) throw new TypeError(`pod ${key} is given twice`);
      next.set(key, p);
    }
    let before: string[];
    if (this.#whole === undefined && !sharesAnAddress(next.values())) {
      const baseBefore = this.#base;
      this.#dirty = new Map();
      try {
        this.#apply(node, next);
        return this.#change(baseBefore);
      } catch (err) {
        if (!(err instanceof NeedsWhole)) throw err;
        before = [...baseBefore, ...this.#textsBeforeDirty()];
      }
    } else {
      before = this.all();
    }
    this.reset();
    if (sharesAnAddress(next.values()) || !this.#tryFromNothing(node, next)) {
      // policyFlows' own order decides.
      this.rebuilt++;
      const built = policyFlows(node, pods, this.#ids);
      this.#whole = built.flows;
      this.#counters = built.counters;
    }
    const after = this.all();
    const had = new Set(before);
    const has = new Set(after);
    return { add: after.filter((f) => !had.has(f)), remove: before.filter((f) => !has.has(f)) };
  }

  /** The per-pod state built from nothing; false (and reset) when the input needs the whole order. */
  #tryFromNothing(node: PolicyNode, next: Map<string, PodPolicyRef>): boolean {
    try {
      this.#apply(node, next);
      this.#dirty = new Map();
      return true;
    } catch (err) {
      if (!(err instanceof NeedsWhole)) throw err;
      this.reset();
      return false;
    }
  }

  /** The flows as they were before this build's changes (this build's dirty entries put back). */
  #textsBeforeDirty(): string[] {
    const out: string[] = [];
    const seen = new Set<string>();
    for (const [id, old] of this.#dirty) {
      seen.add(id);
      if (old !== undefined) out.push(old);
    }
    for (const [id, text] of this.#plain) if (!seen.has(id)) out.push(text);
    for (const [id, c] of this.#clauses) if (!seen.has(id)) out.push(clauseText(c));
    return out;
  }

  #change(baseBefore: readonly string[]): FlowChange {
    const add: string[] = [];
    const remove: string[] = [];
    for (const [id, old] of this.#dirty) {
      const now = id.startsWith('c:') ? clauseTextOf(this.#clauses.get(id)) : this.#plain.get(id);
      if (old === now) continue;
      if (old !== undefined) remove.push(old);
      if (now !== undefined) add.push(now);
    }
    const had = new Set(baseBefore);
    const has = new Set(this.#base);
    for (const f of this.#base) if (!had.has(f)) add.push(f);
    for (const f of baseBefore) if (!has.has(f)) remove.push(f);
    this.#dirty = new Map();
    return { add, remove };
  }

  #apply(node: PolicyNode, next: Map<string, PodPolicyRef>): void {
    this.#base = policyBaseFlows(node);
    for (const [key, share] of this.#pods) {
      if (next.get(key) !== share.policy) this.#withdraw(key, share);
    }
    for (const [key, policy] of next) {
      if (!this.#pods.has(key)) this.#pods.set(key, this.#contribute(key, policy));
    }
    for (const key of this.#orphans) {
      const conj = this.#conjs.get(key);
      if (conj === undefined || conj.members.size > 0) continue;
      for (const [match, action] of conj.clauses) this.#drop(conj.table, match, action);
      this.#conjs.delete(key);
    }
    this.#orphans.clear();
    const used = new Set<string>(this.#conjs.keys());
    for (const share of this.#pods.values()) for (const k of share.keys) used.add(k);
    this.#ids.retain(used);
  }

  #touchPlain(identity: string): void {
    if (!this.#dirty.has(identity)) this.#dirty.set(identity, this.#plain.get(identity));
  }

  #touchClause(id: string): void {
    if (!this.#dirty.has(id)) this.#dirty.set(id, clauseTextOf(this.#clauses.get(id)));
  }

  #withdraw(key: string, share: PodShare): void {
    this.#pods.delete(key);
    for (const identity of share.plain) {
      this.#touchPlain(identity);
      this.#plain.delete(identity);
    }
    for (const cookie of share.cookies) this.#counters.delete(cookie);
    for (const m of share.members) {
      const conj = this.#conjs.get(m.conj) as Conj;
      for (const match of m.matches) {
        const left = (conj.members.get(match) ?? 1) - 1;
        if (left > 0) conj.members.set(match, left);
        else {
          conj.members.delete(match);
          this.#drop(conj.table, match, `conjunction(${conj.id},1/${conj.n})`);
        }
      }
      // A conjunction left without members goes at the end of the build, unless a pod takes it up
      // again meanwhile (its clauses then stay as they are).
      if (conj.members.size === 0) this.#orphans.add(m.conj);
    }
  }

  #contribute(pod: string, policy: PodPolicyRef): PodShare {
    const share: PodShare = { policy, plain: [], members: [], cookies: [], keys: [] };
    const parts = podFlowParts(pod, policy, this.#ids);
    for (const [cookie, counted] of parts.counters) {
      share.cookies.push(cookie);
      this.#counters.set(cookie, counted);
    }
    share.keys.push(...parts.keys);
    const addPlain = (f: PlainFlow) => {
      const identity = plainIdentity(f);
      // One flow per identity: a pod's second allow-all of one address is its first's.
      if (share.plain.includes(identity)) return;
      if (this.#plain.has(identity)) throw new NeedsWhole();
      this.#touchPlain(identity);
      share.plain.push(identity);
      this.#plain.set(identity, plainFlowText(f));
    };
    for (const f of parts.plain) addPlain(f);
    for (const c of parts.conjunctions) {
      let conj = this.#conjs.get(c.base);
      if (conj !== undefined && conj.peersKey !== c.peersKey) {
        // Other peers under the same key: policyFlows' order decides, unless no pod holds the old ones.
        if (conj.members.size > 0) throw new NeedsWhole();
        for (const [match, action] of conj.clauses) this.#drop(conj.table, match, action);
        this.#conjs.delete(c.base);
        conj = undefined;
      }
      if (conj === undefined) {
        const id = this.#ids.id(c.base);
        conj = {
          id,
          n: c.n,
          peersKey: c.peersKey,
          table: c.table,
          clauses: c.clauses().map(([match, k]) => [match, `conjunction(${id},${k}/${c.n})`]),
          members: new Map(),
        };
        this.#conjs.set(c.base, conj);
        for (const [match, action] of conj.clauses) this.#put(c.table, match, action);
      }
      this.#orphans.delete(c.base);
      for (const match of c.members) {
        const had = conj.members.get(match) ?? 0;
        conj.members.set(match, had + 1);
        if (had === 0) this.#put(c.table, match, `conjunction(${conj.id},1/${conj.n})`);
        addPlain(countingFlow(c, conj.id, match));
      }
      share.members.push({ conj: c.base, matches: c.members });
    }
    return share;
  }

  #put(table: number, match: string, action: string): void {
    const id = clauseId(table, match);
    this.#touchClause(id);
    let c = this.#clauses.get(id);
    if (!c) {
      c = { table, match, actions: new Map() };
      this.#clauses.set(id, c);
    }
    c.actions.set(action, (c.actions.get(action) ?? 0) + 1);
  }

  #drop(table: number, match: string, action: string): void {
    const id = clauseId(table, match);
    const c = this.#clauses.get(id);
    if (!c) return;
    this.#touchClause(id);
    const left = (c.actions.get(action) ?? 1) - 1;
    if (left > 0) c.actions.set(action, left);
    else c.actions.delete(action);
    if (c.actions.size === 0) this.#clauses.delete(id);
  }
}

/** Clause ids start with `c:`, so they never meet a plain flow's identity. */
const clauseId = (table: number, match: string) => `c:${table}|${match}`;

function clauseText(c: Clause): string {
  return clauseFlow(c.table, c.match, [...c.actions.keys()].sort().join(','));
}

const clauseTextOf = (c: Clause | undefined) => (c === undefined ? undefined : clauseText(c));

function sharesAnAddress(pods: Iterable<PodPolicyRef>): boolean {
  const seen = new Set<string>();
  for (const p of pods)
    for (const ip of p.ips) {
      if (seen.has(ip)) return true;
      seen.add(ip);
    }
  return false;
}
