/**
 * From the compiler's `PodPolicy` list to the elements of the policy table's sets (policy-table.ts),
 * each with the rule its counter counts for.
 *
 * Ranges, not prefixes: a peer CIDR is the range of its addresses (the compiler has already taken an
 * ipBlock's `except` out, leaving disjoint CIDRs), `any` peers the whole family. Within one pod
 * address, direction and protocol, the rules' (peer range x port range) rectangles may overlap, and
 * the kernel refuses an interval element that starts or ends inside another; so they are cut into
 * disjoint cells, each counted for the first rule (in the order the compiler gives them) that allows
 * it. Adjacent cells of the same rule are merged.
 */
import { DatapathError } from '../../base/errors.js';
import {
  addressBits,
  type IpFamily,
  type IpValue,
  ipValueToBytes,
  parseIp,
  parsePrefix,
} from '../../base/ip.js';
import { concatBytes } from '../../kernel/netlink/codec.js';
import { concatKey, type SetElem } from '../../kernel/netlink/nft-set-elem.js';
import type { CompiledRule, PodPolicy, Protocol } from '../../policy/model.js';
import { policySets } from './policy-table.js';

export const IPPROTO: Record<Protocol, number> = { TCP: 6, UDP: 17, SCTP: 132 };

/** Whose counter an element is: `RuleCounters.rule` and `.pod`. */
export interface ElementOwner {
  rule: string;
  pod: string;
}

export interface PolicyElement extends SetElem {
  set: string;
  owner: ElementOwner;
}

/** An inclusive range owned by the rule of index `owner` (lower index wins). */
interface Span {
  lo: bigint;
  hi: bigint;
  owner: number;
}

const compareBig = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);

/** Every span's start and end + 1, sorted, each once: the points where ownership may change. */
function cutPoints(spans: readonly { lo: bigint; hi: bigint }[]): bigint[] {
  return [...new Set(spans.flatMap((s) => [s.lo, s.hi + 1n]))].sort(compareBig);
}

/**
 * A sweep over the cut points: `covering(lo)` is the items whose span holds the elementary interval
 * starting at `lo`. Items enter in order of their start and leave once past their end, so a whole
 * sweep costs the sort plus, per interval, the items covering it (not every item: the cost that made
 * 1000 pods' cells take seconds).
 */
class Sweep<T> {
  readonly #byLo: T[];
  readonly #span: (item: T) => { lo: bigint; hi: bigint };
  #next = 0;
  #active: T[] = [];

  constructor(items: readonly T[], span: (item: T) => { lo: bigint; hi: bigint }) {
    this.#span = span;
    this.#byLo = [...items].sort((a, b) => compareBig(span(a).lo, span(b).lo));
  }

  /** Called with ascending `lo`, each an elementary interval's start. */
  covering(lo: bigint): T[] {
    this.#active = this.#active.filter((item) => this.#span(item).hi >= lo);
    while (this.#next < this.#byLo.length && this.#span(this.#byLo[this.#next] as T).lo <= lo) {
      const item = this.#byLo[this.#next++] as T;
      if (this.#span(item).hi >= lo) this.#active.push(item);
    }
    return this.#active;
  }
}

/**
 * Cuts overlapping spans into disjoint ones, each point owned by the lowest owner covering it, and
 * merges neighbours of the same owner.
 */
export function disjointSpans(spans: readonly Span[]): Span[] {
  if (spans.length === 0) return [];
  const cuts = cutPoints(spans);
  const sweep = new Sweep(spans, (s) => s);
  const out: Span[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const lo = cuts[i] as bigint;
    const hi = (cuts[i + 1] as bigint) - 1n;
    let owner = -1;
    for (const s of sweep.covering(lo)) if (owner < 0 || s.owner < owner) owner = s.owner;
    if (owner < 0) continue;
    const last = out[out.length - 1];
    if (last && last.owner === owner && last.hi + 1n === lo) last.hi = hi;
    else out.push({ lo, hi, owner });
  }
  return out;
}

/** A rectangle: peer range x port range, of one rule. */
interface Rect {
  peer: Span;
  portLo: number;
  portHi: number;
}

/** Disjoint cells covering the rectangles: peer spans, each with its disjoint port spans. */
export function disjointCells(
  rects: readonly Rect[],
): Array<{ peerLo: bigint; peerHi: bigint; ports: Span[] }> {
  const cuts = cutPoints(rects.map((r) => r.peer));
  const sweep = new Sweep(rects, (r) => r.peer);
  const out: Array<{ peerLo: bigint; peerHi: bigint; ports: Span[] }> = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const lo = cuts[i] as bigint;
    const hi = (cuts[i + 1] as bigint) - 1n;
    const covering = sweep.covering(lo);
    if (covering.length === 0) continue;
    const ports = disjointSpans(
      covering.map((r) => ({ lo: BigInt(r.portLo), hi: BigInt(r.portHi), owner: r.peer.owner })),
    );
    const last = out[out.length - 1];
    if (last && last.peerHi + 1n === lo && sameSpans(last.ports, ports)) last.peerHi = hi;
    else out.push({ peerLo: lo, peerHi: hi, ports });
  }
  return out;
}

function sameSpans(a: readonly Span[], b: readonly Span[]): boolean {
  return (
    a.length === b.length &&
    a.every((s, i) => s.lo === b[i]?.lo && s.hi === b[i]?.hi && s.owner === b[i]?.owner)
  );
}

/** The inclusive address range of a canonical CIDR, or of the whole family for `any`. */
export function peerRange(cidr: string | 'any', family: IpFamily): Span | undefined {
  const bits = BigInt(addressBits(family));
  if (cidr === 'any') return { lo: 0n, hi: (1n << bits) - 1n, owner: 0 };
  const p = parsePrefix(cidr);
  if ('error' in p) throw new DatapathError(`policy: invalid peer CIDR ${JSON.stringify(cidr)}: ${p.error}`);
  if (p.family !== family) return undefined;
  const size = 1n << (bits - BigInt(p.length));
  return { lo: p.network, hi: p.network + size - 1n, owner: 0 };
}

const addr = (family: IpFamily, value: bigint) => ipValueToBytes({ family, value });

function u8(n: number): Uint8Array {
  return Uint8Array.of(n);
}

function be16(n: number): Uint8Array {
  return Uint8Array.of(n >> 8, n & 0xff);
}

/** A cell of one direction and family, without the pod's address: the rest of its key and key end. */
interface Cell {
  set: 'ports' | 'any';
  lo: Uint8Array;
  hi: Uint8Array;
  /** Index of the rule it counts for. */
  owner: number;
}

/** Cells by direction rules and family: pods with the same rules share them (pass one to several calls). */
export type CellCache = Map<string, Cell[]>;

/**
 * Every element the table must hold for `pods`, in a stable order. Throws DatapathError, before
 * anything is changed, on an address, CIDR or port the kernel could not hold. Pods selected by the
 * same policies have the same rules: their cells are cut once.
 */
export function policyElements(
  pods: readonly PodPolicy[],
  cache: CellCache = new Map<string, Cell[]>(),
): PolicyElement[] {
  const out: PolicyElement[] = [];
  // Two pods with one address (a stale Pod object beside the pod that got its address again): the
  // address is the first one's, all of it. Elements of both would overlap, and the kernel refuses a
  // batch with overlapping intervals: every apply would fail while the stale object lasts.
  const claimed = new Set<string>();
  for (const pod of pods) {
    const podId = `${pod.namespace}/${pod.name}`;
    const own: IpValue[] = [];
    for (const ipText of pod.ips) {
      const ip = parseIp(ipText);
      if (!ip)
        throw new DatapathError(`policy: pod ${podId} has an invalid address ${JSON.stringify(ipText)}`);
      const claim = `${ip.family}/${ip.value}`;
      if (claimed.has(claim)) continue;
      claimed.add(claim);
      own.push(ip);
    }
    for (const direction of ['ingress', 'egress'] as const) {
      const dp = pod[direction];
      if (dp === null) continue;
      const entries = JSON.stringify(dp.rules.map((r) => r.entries));
      for (const ip of own) {
        const key = `${ip.family} ${entries}`;
        let cells = cache.get(key);
        if (!cells) {
          cells = directionCells(ip.family, dp.rules);
          cache.set(key, cells);
        }
        const sets = policySets(direction, ip.family);
        const podKey = addr(ip.family, ip.value);
        for (const c of cells)
          out.push({
            set: sets[c.set],
            key: concatBytes([podKey, c.lo]),
            keyEnd: concatBytes([podKey, c.hi]),
            owner: { rule: (dp.rules[c.owner] as CompiledRule).id, pod: podId },
          });
        out.push({ set: sets.iso, key: podKey, owner: { rule: `${podId}/${direction}/deny`, pod: podId } });
      }
    }
  }
  return out;
}

function directionCells(family: IpFamily, rules: readonly CompiledRule[]): Cell[] {
  const anySpans: Span[] = [];
  const rects = new Map<number, Rect[]>();
  rules.forEach((rule, owner) => {
    for (const entry of rule.entries) {
      const peers = (entry.peers === 'any' ? ['any'] : entry.peers)
        .map((c) => peerRange(c, family))
        .filter((s): s is Span => s !== undefined)
        .map((s) => ({ ...s, owner }));
      if (entry.ports === 'any') {
        anySpans.push(...peers);
        continue;
      }
      for (const pr of entry.ports) {
        const proto = IPPROTO[pr.protocol];
        if (
          proto === undefined ||
          !Number.isInteger(pr.first) ||
          !Number.isInteger(pr.last) ||
          pr.first < 0 ||
          pr.last > 65535 ||
          pr.first > pr.last
        )
          throw new DatapathError(`policy: rule ${rule.id} has an invalid port range ${JSON.stringify(pr)}`);
        const list = rects.get(proto) ?? [];
        for (const peer of peers) list.push({ peer, portLo: pr.first, portHi: pr.last });
        rects.set(proto, list);
      }
    }
  });
  const out: Cell[] = [];
  for (const s of disjointSpans(anySpans))
    out.push({ set: 'any', lo: addr(family, s.lo), hi: addr(family, s.hi), owner: s.owner });
  for (const [proto, list] of [...rects].sort((a, b) => a[0] - b[0]))
    for (const cell of disjointCells(list))
      for (const p of cell.ports)
        out.push({
          set: 'ports',
          lo: concatKey([addr(family, cell.peerLo), u8(proto), be16(Number(p.lo))]),
          hi: concatKey([addr(family, cell.peerHi), u8(proto), be16(Number(p.hi))]),
          owner: p.owner,
        });
  return out;
}
