/**
 * Egress masquerade (decision 20): packets from this node's pod CIDRs to anything outside the
 * cluster's pod networks leave with the node's address; packets to the pod networks keep the pod's
 * source. One podwire-owned table, `inet podwire_nat`, for both datapaths (the routing decision and
 * the masquerade happen in the node's IP stack, whichever switch the pod hangs off):
 *
 * - sets `pods_ipv4`/`pods_ipv6`: this node's pod CIDRs (the sources that are masqueraded);
 * - sets `keep_ipv4`/`keep_ipv6`: destinations that keep the pod's source (the cluster's pod
 *   networks and `noMasqueradeCIDRs`); peers joining or leaving change this set, never the rules;
 * - chain `postrouting` (nat, srcnat): one `masquerade` rule per family. A nat chain sees only the
 *   first packet of a connection, so its rule counters count connections;
 * - chain `count` (filter, after srcnat): the named counters `masq_ipv4`/`masq_ipv6` count every
 *   packet that leaves with the node's address, i.e. the original direction of connections whose
 *   original source is a pod of this node and whose real destination is not kept;
 * - chain `forward` (filter): a packet from a pod of this node to a destination that is not kept,
 *   which conntrack finds invalid (a SYN+FIN, an ICMP error for no connection), is dropped: NAT acts
 *   on connections only, so it would leave with the pod's own address (decision 34).
 *
 * Installed by replacing the whole table in one transaction (idempotent: a restart after a crash
 * leaves exactly one table), never per pod.
 */
import { isPrefix, type Prefix, parsePrefix, prefixContains } from '../base/ip.js';
import { dropTable, type Nft } from '../kernel/nft.js';

export const EGRESS_NAT_TABLE = 'podwire_nat';

export interface MasqueradeSets {
  /** This node's pod CIDRs: what is masqueraded. */
  sources: readonly string[];
  /** Destinations that keep the pod's source address. */
  keep: readonly string[];
}

export interface MasqueradeCounters {
  family: 'ipv4' | 'ipv6';
  /** Packets (and their bytes) that left with the node's address. */
  packets: number;
  bytes: number;
  /** Connections masqueraded (the nat rule sees the first packet of each). */
  connections: number;
}

const FAMILIES = [
  { name: 'ipv4', family: 4, match: 'ip', type: 'ipv4_addr' },
  { name: 'ipv6', family: 6, match: 'ip6', type: 'ipv6_addr' },
] as const;

/**
 * The prefixes of one family, canonical, with every prefix inside another dropped and sorted: two
 * prefixes either nest or are disjoint, so what is left never overlaps (an nft interval set refuses
 * overlapping elements). Text that is not a prefix (a peer record's garbage) is skipped.
 */
export function disjointPrefixes(cidrs: readonly string[], family: 4 | 6): string[] {
  const all: Prefix[] = [];
  for (const text of cidrs) {
    const p = parsePrefix(text);
    if (isPrefix(p) && p.family === family) all.push(p);
  }
  const kept = all.filter(
    (p, i) =>
      !all.some((q, j) => prefixContains(q, p) && (q.length < p.length || (q.length === p.length && j < i))),
  );
  return kept.sort((a, b) => (a.network < b.network ? -1 : a.network > b.network ? 1 : 0)).map((p) => p.text);
}

function elements(cidrs: readonly string[], family: 4 | 6): string {
  const list = disjointPrefixes(cidrs, family);
  return list.length > 0 ? ` elements = { ${list.join(', ')} };` : '';
}

/** The nft script that (re)creates the whole table, in one transaction. */
export function egressMasqueradeScript(sets: MasqueradeSets): string {
  const lines = [...dropTable('inet', EGRESS_NAT_TABLE), `table inet ${EGRESS_NAT_TABLE} {`];
  for (const f of FAMILIES) {
    lines.push(`  set pods_${f.name} { type ${f.type}; flags interval;${elements(sets.sources, f.family)} }`);
    lines.push(`  set keep_${f.name} { type ${f.type}; flags interval;${elements(sets.keep, f.family)} }`);
    lines.push(`  counter masq_${f.name} {}`);
  }
  lines.push('  chain postrouting {', '    type nat hook postrouting priority srcnat; policy accept;');
  for (const f of FAMILIES) {
    lines.push(
      `    ${f.match} saddr @pods_${f.name} ${f.match} daddr != @keep_${f.name} counter masquerade comment "${f.name}"`,
    );
  }
  lines.push(
    '  }',
    '  chain count {',
    '    type filter hook postrouting priority srcnat + 10; policy accept;',
  );
  for (const f of FAMILIES) {
    // The reply direction's source is the real destination (after any DNAT, e.g. a Service's).
    lines.push(
      `    ct direction original ct status snat ct original ${f.match} saddr @pods_${f.name} ct reply ${f.match} saddr != @keep_${f.name} counter name masq_${f.name}`,
    );
  }
  lines.push('  }', '  chain forward {', '    type filter hook forward priority filter; policy accept;');
  for (const f of FAMILIES) {
    // pkttype host: what the node routes (IP forwarding takes nothing else). With bridge netfilter the
    // Linux bridge's frames between pods pass this hook too, their unicast marked host for it; their
    // multicast and broadcast stay out, and their unicast goes to kept destinations.
    lines.push(
      `    meta pkttype host ct state invalid ${f.match} saddr @pods_${f.name} ${f.match} daddr != @keep_${f.name} counter drop comment "${f.name}"`,
    );
  }
  lines.push('  }', '}', '');
  return lines.join('\n');
}

/** The nft script that replaces the kept destinations only, in one transaction. */
export function keepSetScript(keep: readonly string[]): string {
  const lines: string[] = [];
  for (const f of FAMILIES) {
    lines.push(`flush set inet ${EGRESS_NAT_TABLE} keep_${f.name}`);
    const list = disjointPrefixes(keep, f.family);
    if (list.length > 0)
      lines.push(`add element inet ${EGRESS_NAT_TABLE} keep_${f.name} { ${list.join(', ')} }`);
  }
  return `${lines.join('\n')}\n`;
}

/** What `nft -j list table inet podwire_nat` holds, in the parts read here. */
interface NftJsonItem {
  set?: { name: string; elem?: unknown[] };
  counter?: { name: string; packets: number; bytes: number };
  rule?: { chain: string; comment?: string; expr: Array<Record<string, unknown>> };
}

/** A set element of a listing: "10.0.0.0/8" for a prefix, the address for a single one. */
function elementText(e: unknown): string | undefined {
  if (typeof e === 'string') return e.includes('/') ? e : `${e}/${e.includes(':') ? 128 : 32}`;
  if (e && typeof e === 'object' && 'prefix' in e) {
    const p = (e as { prefix: { addr: string; len: number } }).prefix;
    return `${p.addr}/${p.len}`;
  }
  return undefined; // a range: podwire never writes one
}

/** The table as installed: what `ensure` checks and what a restart carries over. */
export interface InstalledTable {
  /** The kept destinations of its sets. */
  keep: string[];
  /** The masqueraded sources of its sets (this node's pod CIDRs). */
  sources: string[];
  /** Whether both families' masquerade, count and invalid-drop rules are there. */
  complete: boolean;
  counters: MasqueradeCounters[];
}

/**
 * The table as the kernel holds it; undefined when there is none.
 * Equivalent to: `nft -j list table inet podwire_nat`.
 */
export async function readEgressTable(nft: Nft): Promise<InstalledTable | undefined> {
  let text: string;
  try {
    text = await nft.run(['-j', 'list', 'table', 'inet', EGRESS_NAT_TABLE]);
  } catch {
    return undefined; // no such table (nft exits 1 with "No such file or directory")
  }
  const items = (JSON.parse(text) as { nftables: NftJsonItem[] }).nftables;
  const keep: string[] = [];
  const sources: string[] = [];
  const counters: MasqueradeCounters[] = FAMILIES.map((f) => ({
    family: f.name,
    packets: 0,
    bytes: 0,
    connections: 0,
  }));
  let masqueradeRules = 0;
  let countRules = 0;
  let invalidRules = 0;
  for (const item of items) {
    const set = item.set;
    const into = set?.name.startsWith('keep_') ? keep : set?.name.startsWith('pods_') ? sources : undefined;
    if (set && into) {
      for (const e of set.elem ?? []) {
        const t = elementText(e);
        if (t) into.push(t);
      }
    }
    if (item.counter?.name.startsWith('masq_')) {
      const c = counters.find((x) => `masq_${x.family}` === item.counter?.name);
      if (c) {
        c.packets = item.counter.packets;
        c.bytes = item.counter.bytes;
      }
    }
    const rule = item.rule;
    if (rule?.chain === 'postrouting' && rule.expr.some((x) => 'masquerade' in x)) {
      masqueradeRules++;
      const c = counters.find((x) => x.family === rule.comment);
      const counted = rule.expr.find((x) => 'counter' in x)?.counter as { packets?: number } | undefined;
      if (c && counted?.packets !== undefined) c.connections = counted.packets;
    }
    if (rule?.chain === 'count' && rule.expr.some((x) => 'counter' in x)) countRules++;
    if (rule?.chain === 'forward' && rule.expr.some((x) => 'drop' in x)) invalidRules++;
  }
  return {
    keep,
    sources,
    complete:
      masqueradeRules === FAMILIES.length &&
      countRules === FAMILIES.length &&
      invalidRules === FAMILIES.length,
    counters,
  };
}

/**
 * Whether the installed table is the one `sets` asks for: all its rules, and sets holding exactly
 * these prefixes (compared as the script writes them: per family, disjoint, canonical). A range
 * element (never written by podwire) reads as missing, so a table someone changed that way differs.
 */
export function tableMatches(table: InstalledTable | undefined, sets: MasqueradeSets): boolean {
  if (!table?.complete) return false;
  const same = (installed: readonly string[], wanted: readonly string[]): boolean =>
    FAMILIES.every(
      (f) => disjointPrefixes(installed, f.family).join(',') === disjointPrefixes(wanted, f.family).join(','),
    );
  return same(table.keep, sets.keep) && same(table.sources, sets.sources);
}

/**
 * The masquerade of one node namespace. Every change is one nft transaction, and changes run one
 * after another (the membership's peer updates and a reconcile may ask at the same moment).
 */
export class EgressMasquerade {
  readonly #nft: Nft;
  #sets: MasqueradeSets;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(nft: Nft, sets: MasqueradeSets) {
    this.#nft = nft;
    this.#sets = { sources: [...sets.sources], keep: [...sets.keep] };
  }

  get sets(): MasqueradeSets {
    return this.#sets;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(fn, fn);
    this.#queue = next.catch(() => {});
    return next;
  }

  /** Replaces the table (rules, sets and counters) with one built from the current sets. */
  install(): Promise<void> {
    return this.#serial(() => this.#nft.apply(egressMasqueradeScript(this.#sets)));
  }

  /**
   * Replaces the kept destinations: the set changes, the rules stay. When the set cannot be changed
   * (the table is gone), the whole table is installed again.
   */
  setKeep(keep: readonly string[]): Promise<void> {
    return this.#serial(async () => {
      const next = { ...this.#sets, keep: [...keep] };
      try {
        await this.#nft.apply(keepSetScript(keep));
      } catch {
        // The table is missing or damaged (someone flushed the ruleset): put it back whole.
        await this.#nft.apply(egressMasqueradeScript(next));
      }
      // Only once the kernel has it: after a failure, the same list asked again is tried again.
      this.#sets = next;
    });
  }

  /**
   * Installs the table again when it is missing, lacks a rule, or its sets differ from the wanted ones
   * (someone flushed the ruleset, the table, a chain or a set); true when it did. One `nft -j list`
   * when nothing differs.
   */
  ensure(): Promise<boolean> {
    return this.#serial(async () => {
      if (tableMatches(await readEgressTable(this.#nft), this.#sets)) return false;
      await this.#nft.apply(egressMasqueradeScript(this.#sets));
      return true;
    });
  }

  /** What has been masqueraded since the table was installed; zeros when it is missing. */
  async counters(): Promise<MasqueradeCounters[]> {
    const now = await readEgressTable(this.#nft);
    return now?.counters ?? FAMILIES.map((f) => ({ family: f.name, packets: 0, bytes: 0, connections: 0 }));
  }

  /** Removes the table; nothing to do when it is gone. */
  remove(): Promise<void> {
    return this.#serial(() => removeEgressTable(this.#nft));
  }
}

/** Removes a table an earlier run left (masquerade now turned off). */
export function removeEgressTable(nft: Nft): Promise<void> {
  return nft.apply(`${dropTable('inet', EGRESS_NAT_TABLE).join('\n')}\n`);
}
