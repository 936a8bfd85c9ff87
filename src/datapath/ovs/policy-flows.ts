/**
 * NetworkPolicy as OpenFlow flows (decision 46): what the compiler says each local pod may send and
 * receive (`policy/model.ts`), written as conjunctive matches in tables 47-49 of the pipeline, plus
 * the few fixed flows that send new connections through them. Pure: flows in the text form of
 * pipeline.ts, and which cookie counts what; the backend (policy-ovs-backend.ts) installs them.
 *
 *  46  GATEWAY_CT (policy's flows, priority above the pipeline's): NS/NA -> 50 as before; a packet
 *                 that is not part of a known connection (ct_state -est-rel: new or invalid) -> 47;
 *                 replies and related packets keep the pipeline's flows (Service replies to the gateway)
 *  47  EGRESS_RULES    by source pod: a rule's conjunction -> 48; an egress-isolated pod -> drop;
 *                      else -> 48
 *  48  INGRESS_RULES   the node itself (gateway port, a node address as source) -> 49; by destination
 *                      pod: a rule's conjunction -> 49; an ingress-isolated pod -> drop; else -> 49
 *  49  POLICY_COMMIT   committed in zone 65520 (from the gateway port with ct_mark 1, as table 46 did)
 *                      -> 50, so the connection's later packets and its replies pass as +est/+rpl
 *
 * One rule entry (`AllowEntry`) and direction is one conjunction, whatever the number of pods it
 * applies to (the compiler shares a rule between the pods its policy selects): clause 1 the addresses
 * of those pods (source for egress, destination for ingress), clause 2 the peer CIDRs (left out for
 * `'any'`), clause 3 the ports, each range as masked tp_dst matches (left out for `'any'`). So a peer's
 * flow carries one action per rule that names it, not one per pod and rule: per pod, 1000 pods and
 * 1000 policies put up to 7 160 actions on one flow, over OpenFlow's 65 535-byte message (decision
 * 53). After the conjunction, one flow per pod address matches `conj_id` and that address, with the
 * cookie of that pod's entry, so its counters are the pod's and the rule's: packets that opened a
 * connection the rule allowed (the connection's later packets pass as +est and are not counted
 * again). An entry with neither peers nor ports is a plain flow on the pod's address. Flows of the
 * same table, priority and match are one flow with every conjunction action they carry, as OVS
 * requires.
 */
import type { AllowEntry, DirectionPolicy, PodPolicy, PortRange } from '../../policy/model.js';
import { contentHash } from '../../policy/pod-signature.js';
import { CT_MARK_FROM_GATEWAY, CT_ZONE, cookieText, TABLE } from './pipeline.js';
import { portMasks, portMatch } from './policy-port-mask.js';

/**
 * The policy's tables (decision 46), between the pipeline's GATEWAY_CT and L2_FORWARDING; not in the
 * pipeline's TABLE: the pipeline installs nothing there, and they are reached only while a policy
 * backend's flows are installed.
 */
export const POLICY_TABLE = {
  GATEWAY_CT: TABLE.GATEWAY_CT,
  EGRESS_RULES: 47,
  INGRESS_RULES: 48,
  POLICY_COMMIT: 49,
  L2_FORWARDING: TABLE.L2_FORWARDING,
} as const;

/** The high byte of every policy flow's cookie; the next byte says what the flow counts. */
export const POLICY_COOKIE = 0x05n << 56n;
export const POLICY_COOKIE_MASK = 0xffn << 56n;
const KIND_RULE = 0x01n << 48n;
const KIND_DENY = 0x02n << 48n;

export type Direction = 'ingress' | 'egress';

/** What the flows of one cookie count. */
export interface CounterKey {
  /** `CompiledRule.id`, or `POD/DIRECTION/deny`. */
  rule: string;
  /** `NAMESPACE/NAME` of the local pod. */
  pod: string;
}

export interface PolicyNode {
  /** The OpenFlow port of the gateway: the node's side of the bridge. */
  gatewayOfport: number;
  /** The node's own addresses on the gateway: traffic from them to pods is the node's (kubelet probes). */
  nodeIps: readonly string[];
}

/**
 * Conjunction ids (32 bits, 0 is none) by what they stand for, stable across applies while the
 * backend lives, so an unchanged rule keeps its flows (and their counters) when others change.
 */
export class ConjunctionIds {
  readonly #ids = new Map<string, number>();
  readonly #free: number[] = [];
  #next = 1;

  id(key: string): number {
    let id = this.#ids.get(key);
    if (id === undefined) {
      id = this.#free.pop() ?? this.#next++;
      if (id > 0xffffffff) throw new RangeError('conjunction ids exhausted');
      this.#ids.set(key, id);
    }
    return id;
  }

  /** A copy with the same ids given and free (to compare a builder's flows with `policyFlows`'). */
  clone(): ConjunctionIds {
    const c = new ConjunctionIds();
    for (const [k, v] of this.#ids) c.#ids.set(k, v);
    c.#free.push(...this.#free);
    c.#next = this.#next;
    return c;
  }

  /** Frees every id whose key is not in `used`. */
  retain(used: ReadonlySet<string>): void {
    for (const [key, id] of this.#ids) {
      if (!used.has(key)) {
        this.#ids.delete(key);
        this.#free.push(id);
      }
    }
  }
}

const isV6 = (ip: string) => ip.includes(':');

function flow(cookie: bigint, table: number, priority: number, match: string, actions: string): string {
  const m = match === '' ? '' : `,${match}`;
  return `table=${table},priority=${priority},cookie=${cookieText(cookie)}${m} actions=${actions}`;
}

const goto = (table: number) => `goto_table:${table}`;

/** `ip,nw_src=A` / `ipv6,ipv6_src=A/64`; a /0 is the family alone. */
function addressMatch(cidrOrIp: string, side: 'src' | 'dst'): string {
  const v6 = isV6(cidrOrIp);
  const [addr, len] = cidrOrIp.split('/');
  if (len === '0') return v6 ? 'ipv6' : 'ip';
  const full = (v6 && len === '128') || (!v6 && len === '32') ? addr : cidrOrIp;
  return v6 ? `ipv6,ipv6_${side}=${full}` : `ip,nw_${side}=${full}`;
}

const PROTO: Record<PortRange['protocol'], [string, string]> = {
  TCP: ['tcp', 'tcp6'],
  UDP: ['udp', 'udp6'],
  SCTP: ['sctp', 'sctp6'],
};

/** The port clause's matches of one range, for each family the pod has. */
function portMatches(r: PortRange, families: Families): string[] {
  const out: string[] = [];
  const [v4, v6] = PROTO[r.protocol];
  for (const proto of [...(families.v4 ? [v4] : []), ...(families.v6 ? [v6] : [])]) {
    for (const m of portMasks(r.first, r.last)) {
      const port = portMatch(m);
      out.push(port === '' ? proto : `${proto},${port}`);
    }
  }
  return out;
}

interface Families {
  v4: boolean;
  v6: boolean;
}

/** Priorities inside tables 47 and 48. */
const PRIO = { NODE: 250, CONJ_ID: 200, ALLOW_ALL: 150, CLAUSE: 100, ISOLATED: 50 } as const;

/** Flows under construction: conjunction actions gathered per (table, priority, match). */
class FlowSet {
  readonly flows: string[] = [];
  readonly #clauses = new Map<
    string,
    { table: number; priority: number; match: string; actions: Set<string> }
  >();
  readonly #plain = new Set<string>();

  add(cookie: bigint, table: number, priority: number, match: string, actions: string): void {
    const id = plainIdentity({ cookie, table, priority, match, actions });
    // One flow per identity: a second allow-all of the same pod is the first's (counted there).
    if (this.#plain.has(id)) return;
    this.#plain.add(id);
    this.flows.push(flow(cookie, table, priority, match, actions));
  }

  clause(table: number, match: string, conj: number, k: number, n: number): void {
    const id = `${table}|${match}`;
    let c = this.#clauses.get(id);
    if (!c) {
      c = { table, priority: PRIO.CLAUSE, match, actions: new Set() };
      this.#clauses.set(id, c);
    }
    c.actions.add(`conjunction(${conj},${k}/${n})`);
  }

  all(): string[] {
    const clauses = [...this.#clauses.values()].map((c) =>
      flow(POLICY_COOKIE, c.table, c.priority, c.match, [...c.actions].sort().join(',')),
    );
    return [...this.flows, ...clauses];
  }
}

/** The fixed flows: the way into the policy tables, their defaults, the node's pass, the commit. */
export function policyBaseFlows(node: PolicyNode): string[] {
  const c = POLICY_COOKIE;
  const T = POLICY_TABLE;
  const mark = `0x${CT_MARK_FROM_GATEWAY.toString(16)}`;
  const out = [
    // ND is not tracked (it would be -est-rel): it keeps the way it had, to forwarding.
    flow(c, T.GATEWAY_CT, 240, 'icmp6,icmp_type=135,icmp_code=0', goto(T.L2_FORWARDING)),
    flow(c, T.GATEWAY_CT, 240, 'icmp6,icmp_type=136,icmp_code=0', goto(T.L2_FORWARDING)),
    flow(c, T.EGRESS_RULES, 0, '', goto(T.INGRESS_RULES)),
    flow(c, T.INGRESS_RULES, 0, '', goto(T.POLICY_COMMIT)),
    flow(c, T.POLICY_COMMIT, 0, '', goto(T.L2_FORWARDING)),
  ];
  for (const proto of ['ip', 'ipv6']) {
    // Above the pipeline's commit of the gateway's new connections (220): the decision comes first.
    out.push(flow(c, T.GATEWAY_CT, 230, `ct_state=-est-rel+trk,${proto}`, goto(T.EGRESS_RULES)));
    out.push(
      flow(
        c,
        T.POLICY_COMMIT,
        200,
        `${proto},in_port=${node.gatewayOfport}`,
        `ct(commit,zone=${CT_ZONE},exec(set_field:${mark}->ct_mark)),${goto(T.L2_FORWARDING)}`,
      ),
    );
    out.push(flow(c, T.POLICY_COMMIT, 100, proto, `ct(commit,zone=${CT_ZONE}),${goto(T.L2_FORWARDING)}`));
  }
  for (const ip of node.nodeIps) {
    const m = `${addressMatch(ip, 'src')},in_port=${node.gatewayOfport}`;
    out.push(flow(c, T.INGRESS_RULES, PRIO.NODE, m, goto(T.POLICY_COMMIT)));
  }
  return out;
}

/** A policy flow set and what each counting cookie counts. */
export interface PolicyFlows {
  flows: string[];
  counters: Map<bigint, CounterKey>;
}

/**
 * Every flow of `pods`, base flows included. `ids` gives each (pod, direction, rule, entry) and each
 * (pod, direction) its number; the ids of what is gone are freed.
 */
export function policyFlows(node: PolicyNode, pods: readonly PodPolicy[], ids: ConjunctionIds): PolicyFlows {
  const set = new FlowSet();
  const counters = new Map<bigint, CounterKey>();
  const used = new Set<string>();
  const seen = new Set<string>();
  const conjunctions = new Map<string, Conjunction>();
  for (const p of pods) {
    const pod = `${p.namespace}/${p.name}`;
    if (seen.has(pod)) throw new TypeError(`pod ${pod} is given twice`);
    seen.add(pod);
    const parts = podFlowParts(pod, p, ids);
    for (const [cookie, key] of parts.counters) counters.set(cookie, key);
    for (const k of parts.keys) used.add(k);
    for (const f of parts.plain) set.add(f.cookie, f.table, f.priority, f.match, f.actions);
    for (const c of parts.conjunctions) {
      // The first pod under a rule entry keeps its plain key; a later one whose peers differ (never
      // from the compiler, which gives every pod of a rule its peers) has its own.
      const first = conjunctions.get(c.base);
      const conjKey =
        first === undefined || first.peersKey === c.peersKey ? c.base : `${c.base}|${c.peersKey}`;
      let conj = conjunctions.get(conjKey);
      if (!conj) {
        used.add(conjKey);
        conj = { id: ids.id(conjKey), n: c.n, peersKey: c.peersKey, members: new Set() };
        conjunctions.set(conjKey, conj);
        for (const [match, k] of c.clauses()) set.clause(c.table, match, conj.id, k, c.n);
      }
      for (const match of c.members) {
        if (!conj.members.has(match)) {
          conj.members.add(match);
          set.clause(c.table, match, conj.id, 1, conj.n);
        }
        const f = countingFlow(c, conj.id, match);
        set.add(f.cookie, f.table, f.priority, f.match, f.actions);
      }
    }
  }
  ids.retain(used);
  return { flows: [...policyBaseFlows(node), ...set.all()], counters };
}

/**
 * Every given pod isolated both ways, nothing allowed but what the base flows pass (the node itself,
 * replies): what a bridge that lost its flows holds until the policy backend's first apply, so that
 * a switch restarted while the agent was away forwards nothing a policy would refuse meanwhile.
 */
export function isolatedPolicyFlows(
  node: PolicyNode,
  pods: ReadonlyArray<{ name: string; ips: readonly string[] }>,
): string[] {
  const isolated = { policies: [UNTIL_APPLIED], rules: [] };
  const all = pods.map((p) => ({
    namespace: '',
    name: p.name,
    ips: [...p.ips],
    ingress: isolated,
    egress: isolated,
  }));
  return policyFlows(node, all, new ConjunctionIds()).flows;
}

/** The isolating "policy" of a pod on a replay before the policy backend's first apply. */
export const UNTIL_APPLIED = '(policy not applied yet: isolated)';

/**
 * One conjunction per rule entry, whatever the number of pods it applies to: the pods are its first
 * clause (their addresses), the peers and ports the others. Keyed by direction, the pods' address
 * families, rule id, entry index and its ports (below), so the conjunction keeps its id, and its
 * counting flows, while it stays.
 */
interface Conjunction {
  id: number;
  /** Clause count: the pods, then the peers and the ports where they are not `any`. */
  n: number;
  /** The peers' content (a hash), to tell a pod whose peers differ under the same rule. */
  peersKey: string;
  /** The pods' addresses added so far (clause 1). */
  members: Set<string>;
}

/** A flow that is not a clause: a drop, an allow-all, or (built by the caller) a counting flow. */
export interface PlainFlow {
  cookie: bigint;
  table: number;
  priority: number;
  match: string;
  actions: string;
}

/** One pod's use of one rule entry's conjunction. */
export interface ConjunctionUse {
  /** The key without the peers (see `policyFlows`); `peersKey` the peers' hash ('any' for none). */
  base: string;
  peersKey: string;
  n: number;
  table: number;
  /** Where the counting flow sends what the conjunction allowed. */
  next: number;
  /** The conjunction's clauses 2..n: (match, k); computed when asked (a conjunction makes them once). */
  clauses: () => Array<[string, number]>;
  /** Clause 1: the pod's addresses. */
  members: string[];
  /** The pod's entry's cookie: its counting flows (`conj_id=ID,MEMBER`). */
  cookie: bigint;
}

/** One pod's share of the policy flows, before conjunctions are shared between pods. */
export interface PodFlowParts {
  counters: Array<[bigint, CounterKey]>;
  /** The id keys it uses: its deny keys and entry keys (conjunction keys are the caller's). */
  keys: string[];
  plain: PlainFlow[];
  conjunctions: ConjunctionUse[];
}

/** What one pod contributes, both directions (egress first, as `policyFlows` has always ordered them). */
export function podFlowParts(pod: string, p: PodPolicy, ids: ConjunctionIds): PodFlowParts {
  const parts: PodFlowParts = { counters: [], keys: [], plain: [], conjunctions: [] };
  for (const dir of ['egress', 'ingress'] as const) {
    const d = p[dir];
    if (d) podDirection(parts, ids, pod, p.ips, dir, d);
  }
  return parts;
}

function podDirection(
  parts: PodFlowParts,
  ids: ConjunctionIds,
  pod: string,
  ips: readonly string[],
  dir: Direction,
  d: DirectionPolicy,
): void {
  const T = POLICY_TABLE;
  const table = dir === 'egress' ? T.EGRESS_RULES : T.INGRESS_RULES;
  const next = dir === 'egress' ? T.INGRESS_RULES : T.POLICY_COMMIT;
  const own = dir === 'egress' ? 'src' : 'dst';
  const peer = dir === 'egress' ? 'dst' : 'src';
  const denyKey = `${pod}|${dir}|deny`;
  parts.keys.push(denyKey);
  const deny = POLICY_COOKIE | KIND_DENY | BigInt(ids.id(denyKey));
  parts.counters.push([deny, { rule: `${pod}/${dir}/deny`, pod }]);
  for (const ip of ips)
    parts.plain.push({
      cookie: deny,
      table,
      priority: PRIO.ISOLATED,
      match: addressMatch(ip, own),
      actions: 'drop',
    });
  // A peer of a family the pod has not can never meet it; an empty list allows nothing: no flow.
  const families = { v4: ips.some((ip) => !isV6(ip)), v6: ips.some(isV6) };
  for (const rule of d.rules) {
    rule.entries.forEach((entry: AllowEntry, i: number) => {
      const peers = entry.peers === 'any' ? null : entry.peers;
      const ports = entry.ports === 'any' ? null : entry.ports;
      const reachable = peers && reachablePeers(peers, families);
      if ((reachable && reachable.length === 0) || (ports && ports.length === 0)) return;
      // What this pod's entry counts: its own cookie, on the flow that says the entry allowed it.
      const key = `${pod}|${dir}|${rule.id}|${i}`;
      parts.keys.push(key);
      const cookie = POLICY_COOKIE | KIND_RULE | BigInt(ids.id(key));
      parts.counters.push([cookie, { rule: rule.id, pod }]);
      const n = 1 + (peers ? 1 : 0) + (ports ? 1 : 0);
      if (n === 1) {
        for (const ip of ips)
          parts.plain.push({
            cookie,
            table,
            priority: PRIO.ALLOW_ALL,
            match: addressMatch(ip, own),
            actions: goto(next),
          });
        return;
      }
      // Keyed without the peers: the compiler gives every pod the same peers for a rule (only an
      // ingress rule's named ports are resolved per pod), so a rule keeps its id, its counting flows
      // and their counters while pods come and go among its peers.
      const base = `conj|${dir}|${families.v4 ? 4 : ''}${families.v6 ? 6 : ''}|${rule.id}|${i}|${ports ? contentHash(ports) : 'any'}`;
      const clauses = () => {
        const out: Array<[string, number]> = [];
        let k = 2;
        if (reachable) {
          for (const cidr of reachable) out.push([addressMatch(cidr, peer), k]);
          k++;
        }
        if (ports) for (const r of ports) for (const m of portMatches(r, families)) out.push([m, k]);
        return out;
      };
      parts.conjunctions.push({
        base,
        peersKey: peers ? contentHash(peers) : 'any',
        n,
        table,
        next,
        clauses,
        members: ips.map((ip) => addressMatch(ip, own)),
        cookie,
      });
    });
  }
}

/** Per peer list (one array per compiled rule, every pod's) and families: the peers of those families. */
const reachableMemo = new WeakMap<readonly string[], Map<string, string[]>>();

function reachablePeers(peers: readonly string[], families: Families): string[] {
  let byFamilies = reachableMemo.get(peers);
  if (byFamilies === undefined) {
    byFamilies = new Map();
    reachableMemo.set(peers, byFamilies);
  }
  const key = `${families.v4 ? 4 : ''}${families.v6 ? 6 : ''}`;
  let out = byFamilies.get(key);
  if (out === undefined) {
    out = peers.filter((cidr) => (isV6(cidr) ? families.v6 : families.v4));
    byFamilies.set(key, out);
  }
  return out;
}

/** A clause flow's text: one (table, match) with every conjunction action on it (sorted). */
export function clauseFlow(table: number, match: string, actions: string): string {
  return flow(POLICY_COOKIE, table, PRIO.CLAUSE, match, actions);
}

/** A plain flow's identity (table, priority, match): OVS holds one flow per identity. */
export function plainIdentity(f: PlainFlow): string {
  return `${f.table}|${f.priority}|${f.match}`;
}

export function plainFlowText(f: PlainFlow): string {
  return flow(f.cookie, f.table, f.priority, f.match, f.actions);
}

/** The pod's counting flow of one of its addresses in conjunction `id`. */
export function countingFlow(c: ConjunctionUse, id: number, member: string): PlainFlow {
  return {
    cookie: c.cookie,
    table: c.table,
    priority: PRIO.CONJ_ID,
    match: `conj_id=${id},${member}`,
    actions: goto(c.next),
  };
}
