/**
 * Peer records checked before they become routes, neighbour or FDB entries (issue 15, finding 2):
 * anyone who can write the store could otherwise steer this node's traffic. A record is refused
 * whole when one of its pod CIDRs
 *
 * - lies outside `clusterCIDRs` (when the cluster leases from them);
 * - overlaps this node's pod CIDRs, or those of a peer already accepted;
 * - covers this node's underlay address, its own, or an accepted peer's;
 *
 * or when its underlay address is this node's or lies inside a pod CIDR accepted here, or when its
 * VTEP MAC (its `vtepMac`, else the one derived from its name: `vtepMacOf`) is not a unicast address,
 * is all zeros, or is this node's or an accepted peer's: the overlay points the FDB entry of a MAC at
 * one underlay address, so a record copying a peer's MAC would pull that peer's pod traffic. First
 * come, first served: a record that collides with an accepted one is refused, the accepted one keeps
 * its routes; when the accepted one goes or changes, refused records are checked again. A full check
 * (`reset`) takes the records accepted so far first, then the others by name (those using the MAC
 * their own name derives before those naming another, so a fresh agent does not hand a node's
 * derived MAC to a record that copied it), so it keeps the same winners. Overlap checks are binary
 * searches over the accepted CIDRs (kept disjoint, sorted by start) and the underlay addresses, the
 * MAC check one lookup in a map from MAC to owner, so a check costs O(log N), not O(N).
 */
import {
  type IpFamily,
  isPrefix,
  type Prefix,
  parseIp,
  parsePrefix,
  prefixContains,
  prefixSize,
} from '../../base/ip.js';
import { isMac, ZERO_MAC } from '../../base/mac.js';
import type { NodeRecord } from '../../cluster/store.js';
import { vtepMacFor, vtepMacOf } from '../../datapath/overlay/vxlan-overlay.js';

interface Span {
  start: bigint;
  end: bigint;
  owner: string;
}

/** Spans sorted by start; for CIDRs kept disjoint, so at most one can overlap a query's start. */
class SortedSpans {
  readonly #items: Span[] = [];

  /** Index of the first span whose start is greater than `value`. */
  #upper(value: bigint): number {
    let lo = 0;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#items[mid] as Span).start <= value) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  add(span: Span): void {
    this.#items.splice(this.#upper(span.start), 0, span);
  }

  remove(owner: string, start: bigint): void {
    for (let i = this.#upper(start - 1n); i < this.#items.length; i++) {
      const s = this.#items[i] as Span;
      if (s.start !== start) return;
      if (s.owner === owner) {
        this.#items.splice(i, 1);
        return;
      }
    }
  }

  /** For disjoint spans: the one overlapping [start, end], if any. */
  overlapping(start: bigint, end: bigint): Span | undefined {
    const i = this.#upper(end) - 1;
    const s = this.#items[i];
    return s !== undefined && s.end >= start ? s : undefined;
  }

  /** For points (start = end, duplicates allowed): one inside [start, end], if any. */
  pointIn(start: bigint, end: bigint): Span | undefined {
    const i = this.#upper(start - 1n);
    const s = this.#items[i];
    return s !== undefined && s.start <= end ? s : undefined;
  }
}

function span(p: Prefix, owner: string): Span {
  return { start: p.network, end: p.network + prefixSize(p) - 1n, owner };
}

export interface PeerCheckOptions {
  /** This node: its name, underlay address, pod CIDRs and VTEP MAC (derived from its name if absent). */
  self: Pick<NodeRecord, 'name' | 'underlayIP' | 'podCIDRs' | 'vtepMac'>;
  /** The cluster CIDRs when the cluster leases from them; every peer CIDR must lie inside one. */
  clusterCIDRs?: readonly string[];
}

/** What a change of records does to the accepted peers. */
export interface AcceptedChanges {
  put: NodeRecord[];
  removed: string[];
  /** Records refused now, with the reason (each a new refusal or a new reason). */
  refused: Array<{ name: string; reason: string }>;
}

export class PeerCheck {
  readonly #self: PeerCheckOptions['self'];
  readonly #clusterCIDRs: Prefix[];
  readonly #accepted = new Map<string, NodeRecord>();
  /** Refused records and why, so that a reason is reported once. */
  readonly #refused = new Map<string, { record: NodeRecord; reason: string }>();
  readonly #cidrs: Record<IpFamily, SortedSpans> = { 4: new SortedSpans(), 6: new SortedSpans() };
  readonly #underlays: Record<IpFamily, SortedSpans> = { 4: new SortedSpans(), 6: new SortedSpans() };
  /** The VTEP MAC of this node and of each accepted peer -> its owner. */
  readonly #macs = new Map<string, string>();
  /** Refusals since the agent started (the metric). */
  refusedTotal = 0;

  constructor(o: PeerCheckOptions) {
    this.#self = o.self;
    this.#clusterCIDRs = (o.clusterCIDRs ?? []).map((c) => parsePrefix(c)).filter(isPrefix);
    this.#index(o.self);
  }

  get accepted(): NodeRecord[] {
    return [...this.#accepted.values()];
  }

  /** The refused records now, with their reasons. */
  get refused(): Array<{ name: string; reason: string }> {
    return [...this.#refused]
      .map(([name, r]) => ({ name, reason: r.reason }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /** Forgets everything and checks `records` afresh, by name. */
  reset(records: Iterable<NodeRecord>): AcceptedChanges {
    const all = new Map<string, NodeRecord | undefined>();
    for (const name of this.#accepted.keys()) all.set(name, undefined);
    for (const name of this.#refused.keys()) all.set(name, undefined);
    for (const r of records) all.set(r.name, r);
    return this.update(all);
  }

  /** Applies changed records (undefined: deleted) and returns what changes among the accepted. */
  update(changes: ReadonlyMap<string, NodeRecord | undefined>): AcceptedChanges {
    const wasAccepted = new Set<string>();
    let freed = false;
    for (const name of changes.keys()) {
      const before = this.#accepted.get(name);
      if (before) {
        this.#unindex(before);
        this.#accepted.delete(name);
        wasAccepted.add(name);
        freed = true;
      }
    }
    const candidates = new Map<string, NodeRecord>();
    for (const [name, record] of changes) {
      if (record) candidates.set(name, record);
      else this.#refused.delete(name);
    }
    // What an accepted record held may have been what kept a refused one out.
    if (freed) for (const [name, r] of this.#refused) if (!changes.has(name)) candidates.set(name, r.record);
    const out: AcceptedChanges = { put: [], removed: [], refused: [] };
    // Records accepted before this change go first, so that a full check (or a change of an accepted
    // record) never hands a collided-over CIDR or MAC to the newcomer: first come, first served.
    // Among newcomers wanting one VTEP MAC, those naming a MAC other than their name's go last: at a
    // fresh start an "a-..." record copying node-2's MAC would otherwise win it by name. (Hashing a
    // name costs microseconds, so only such collisions pay for it.)
    const macUsers = new Map<string, number>();
    for (const [name, r] of candidates) {
      if (wasAccepted.has(name)) continue;
      const mac = macKey(r);
      macUsers.set(mac, (macUsers.get(mac) ?? 0) + 1);
    }
    const rank = new Map<string, number>();
    for (const [name, r] of candidates) {
      const copies =
        r.vtepMac !== undefined && (macUsers.get(macKey(r)) ?? 0) > 1 && macKey(r) !== vtepMacFor(name);
      rank.set(name, wasAccepted.has(name) ? 0 : copies ? 2 : 1);
    }
    const order = [...candidates.keys()].sort(
      (a, b) => (rank.get(a) as number) - (rank.get(b) as number) || (a < b ? -1 : a > b ? 1 : 0),
    );
    for (const name of order) {
      const record = candidates.get(name) as NodeRecord;
      const reason = this.#check(record);
      if (reason === undefined) {
        this.#refused.delete(name);
        this.#accepted.set(name, record);
        this.#index(record);
        out.put.push(record);
        continue;
      }
      const before = this.#refused.get(name);
      this.#refused.set(name, { record, reason });
      if (before?.reason !== reason) {
        this.refusedTotal++;
        out.refused.push({ name, reason });
      }
    }
    for (const name of wasAccepted) if (!this.#accepted.has(name)) out.removed.push(name);
    return out;
  }

  #check(r: NodeRecord): string | undefined {
    if (r.name === this.#self.name) return 'carries this node name';
    const underlay = parseIp(r.underlayIP);
    if (underlay === undefined) return `underlay address ${r.underlayIP} is not an IP address`;
    if (r.underlayIP === this.#self.underlayIP) return `underlay address ${r.underlayIP} is this node's`;
    const inCidr = this.#cidrs[underlay.family].overlapping(underlay.value, underlay.value);
    if (inCidr)
      return `underlay address ${r.underlayIP} lies inside the pod CIDRs of ${describe(inCidr.owner, this.#self.name)}`;
    const mac = macKey(r);
    if (!isMac(mac)) return `VTEP MAC ${mac} is not a MAC address`;
    // A multicast (or broadcast) or all-zero MAC is not one tunnel end: the kernel's VXLAN FDB floods
    // to the all-zero entry.
    if (mac === ZERO_MAC) return `VTEP MAC ${mac} is all zeros`;
    if (Number.parseInt(mac.slice(0, 2), 16) & 1) return `VTEP MAC ${mac} is not a unicast address`;
    const macOwner = this.#macs.get(mac);
    if (macOwner !== undefined)
      return `VTEP MAC ${mac} is the VTEP MAC of ${describe(macOwner, this.#self.name)}`;
    const mine: Span[] = [];
    for (const text of r.podCIDRs) {
      const p = parsePrefix(text);
      if (!isPrefix(p)) return `pod CIDR ${text}: ${p.error}`;
      if (this.#clusterCIDRs.length > 0 && !this.#clusterCIDRs.some((c) => prefixContains(c, p))) {
        return `pod CIDR ${text} lies outside clusterCIDRs`;
      }
      const s = span(p, r.name);
      const other = this.#cidrs[p.family].overlapping(s.start, s.end);
      if (other)
        return `pod CIDR ${text} overlaps the pod CIDRs of ${describe(other.owner, this.#self.name)}`;
      const point = this.#underlays[p.family].pointIn(s.start, s.end);
      if (point)
        return `pod CIDR ${text} covers the underlay address of ${describe(point.owner, this.#self.name)}`;
      if (underlay.family === p.family && s.start <= underlay.value && underlay.value <= s.end) {
        return `pod CIDR ${text} covers its own underlay address ${r.underlayIP}`;
      }
      if (mine.some((m) => m.start <= s.end && s.start <= m.end))
        return `pod CIDRs ${r.podCIDRs.join(', ')} overlap each other`;
      mine.push(s);
    }
    return undefined;
  }

  #index(r: PeerCheckOptions['self']): void {
    const owner = r.name;
    for (const text of r.podCIDRs) {
      const p = parsePrefix(text);
      if (isPrefix(p)) this.#cidrs[p.family].add(span(p, owner));
    }
    const u = parseIp(r.underlayIP);
    if (u) this.#underlays[u.family].add({ start: u.value, end: u.value, owner });
    this.#macs.set(macKey(r), owner);
  }

  #unindex(r: NodeRecord): void {
    for (const text of r.podCIDRs) {
      const p = parsePrefix(text);
      if (isPrefix(p)) this.#cidrs[p.family].remove(r.name, p.network);
    }
    const u = parseIp(r.underlayIP);
    if (u) this.#underlays[u.family].remove(r.name, u.value);
    const mac = macKey(r);
    if (this.#macs.get(mac) === r.name) this.#macs.delete(mac);
  }
}

/** The VTEP MAC a record makes the overlay use (vxlan-overlay.ts), in canonical (lower-case) text. */
function macKey(r: Pick<NodeRecord, 'name' | 'vtepMac'>): string {
  return vtepMacOf(r).toLowerCase();
}

function describe(owner: string, self: string): string {
  return owner === self ? 'this node' : `node ${owner}`;
}
