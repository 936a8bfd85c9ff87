/**
 * What an overlay holds in the kernel for its peers, kept as three keyed tables (routes by
 * destination, neighbours by address, FDB entries by MAC), with the owner of every entry. Both
 * overlays describe a peer's entries (`PeerEntries`); this class turns a change of some peers into
 * exactly the netlink requests for the entries that change (`update`), or compares the whole wanted
 * state with a dump of the kernel and sends only the differences (`converge`). Requests go out in
 * batches (`Rtnetlink.batch`), so a burst of peers costs a few syscalls per peer, not round trips.
 *
 * The wanted value of a key is its owner's; should two peers want one key (overlapping records,
 * which the agent refuses before they get here), the peer with the smallest name holds it, so the
 * delta and the full converge always agree on one answer whatever the order of the changes.
 */
import { constants } from 'node:os';
import { DatapathError } from '../../base/errors.js';
import { AF_INET, AF_INET6, type KernelError } from '../../kernel/libc.js';
import {
  deleteFdbRequest,
  deleteNeighRequest,
  setFdbRequest,
  setNeighRequest,
} from '../../kernel/netlink/neigh-ops.js';
import { type Rtnetlink, routeAddRequest, routeDeleteRequest } from '../../kernel/netlink/rtnetlink.js';
import type { BatchRequest } from '../../kernel/netlink/socket.js';
import { type OverlayStatus, type PeerChanges, type PeerNode, RTPROT_PODWIRE } from './overlay.js';

/** The kernel entries one peer needs. */
export interface PeerEntries {
  /** Destination CIDR -> gateway. */
  routes: Map<string, string>;
  /** Neighbour address -> MAC (encap only). */
  neighs: Map<string, string>;
  /** VTEP MAC -> underlay IP (encap only). */
  fdb: Map<string, string>;
  /** Why some of the peer's CIDRs are not programmed. */
  skipped: string[];
}

type Table = 'routes' | 'neighs' | 'fdb';
/** One owner (the usual case: no per-key map, less memory and garbage), or several. */
type Owners = { name: string; value: string } | Map<string, string>;
const TABLES: readonly Table[] = ['routes', 'neighs', 'fdb'];

export interface PeerTableOptions {
  nl: Rtnetlink;
  /** The device routes leave by and neighbour/FDB entries live on. */
  index: () => number;
  /** Whether routes are `onlink` (encap: the gateway is the peer CIDR's network address). */
  onlink: boolean;
  /** Whether the device's neighbours and FDB entries are the overlay's (encap). */
  ownsNeighbours: boolean;
  entries(peer: PeerNode): PeerEntries;
}

/** Throws when the kernel refused entries of a converge or an update (`errors`), naming the first three. */
export function throwIfRefused(what: string, errors: readonly string[]): void {
  if (errors.length > 0) {
    throw new DatapathError(`${what}: the kernel refused ${errors.length}: ${errors.slice(0, 3).join('; ')}`);
  }
}

function familyOf(address: string): number {
  return address.includes(':') ? AF_INET6 : AF_INET;
}

/** A delete whose object was already gone is what was wanted. */
function alreadyGone(err: KernelError): boolean {
  return err.errno === constants.errno.ENOENT || err.errno === constants.errno.ESRCH;
}

export class PeerTable {
  readonly #o: PeerTableOptions;
  readonly #peers = new Map<string, { peer: PeerNode; entries: PeerEntries }>();
  /** Per table, per key: the value its owner wants (a map only while several peers want the key). */
  readonly #owners: Record<Table, Map<string, Owners>> = {
    routes: new Map(),
    neighs: new Map(),
    fdb: new Map(),
  };
  /** Per table: what the kernel holds, as far as this table knows (what its requests did). */
  readonly #programmed: Record<Table, Map<string, string>> = {
    routes: new Map(),
    neighs: new Map(),
    fdb: new Map(),
  };

  constructor(options: PeerTableOptions) {
    this.#o = options;
  }

  get size(): number {
    return this.#peers.size;
  }

  status(): OverlayStatus {
    const status: OverlayStatus = { peers: [], skipped: [] };
    for (const [name, { entries }] of this.#peers) {
      status.peers.push(name);
      for (const reason of entries.skipped) status.skipped.push({ name, reason });
    }
    status.peers.sort();
    return status;
  }

  /** Applies a change of some peers; only the entries they own (or owned) are touched. */
  async update(changes: PeerChanges): Promise<string[]> {
    const touched: Record<Table, Set<string>> = { routes: new Set(), neighs: new Set(), fdb: new Set() };
    for (const name of changes.removed) this.#forget(name, touched);
    for (const peer of changes.put) {
      this.#forget(peer.name, touched);
      this.#adopt(peer, touched);
    }
    const have: Record<Table, Map<string, string>> = { routes: new Map(), neighs: new Map(), fdb: new Map() };
    for (const t of TABLES) {
      for (const key of touched[t]) {
        const v = this.#programmed[t].get(key);
        if (v !== undefined) have[t].set(key, v);
      }
    }
    return this.#send(have, touched);
  }

  /**
   * Makes the peer set exactly `peers` and the kernel hold exactly their entries: dumps the device's
   * routes (podwire's only), neighbours and FDB, and sends requests for the differences only.
   */
  async converge(peers: readonly PeerNode[]): Promise<string[]> {
    const keep = new Set(peers.map((p) => p.name));
    const removed = [...this.#peers.keys()].filter((n) => !keep.has(n));
    const touched: Record<Table, Set<string>> = { routes: new Set(), neighs: new Set(), fdb: new Set() };
    for (const name of removed) this.#forget(name, touched);
    for (const peer of peers) {
      this.#forget(peer.name, touched);
      this.#adopt(peer, touched);
    }
    const have = this.#dump();
    const all: Record<Table, Set<string>> = { routes: new Set(), neighs: new Set(), fdb: new Set() };
    for (const t of TABLES) {
      for (const key of have[t].keys()) all[t].add(key);
      for (const key of this.#owners[t].keys()) all[t].add(key);
      this.#programmed[t] = new Map(have[t]);
    }
    return this.#send(have, all);
  }

  /** Records what `peer` wants, marking its keys as touched. */
  #adopt(peer: PeerNode, touched: Record<Table, Set<string>>): void {
    const entries = this.#o.entries(peer);
    this.#peers.set(peer.name, { peer, entries });
    for (const t of TABLES) {
      const table = this.#owners[t];
      for (const [key, value] of entries[t]) {
        const owners = table.get(key);
        if (owners === undefined) table.set(key, { name: peer.name, value });
        else if (owners instanceof Map) owners.set(peer.name, value);
        else if (owners.name === peer.name) owners.value = value;
        else
          table.set(
            key,
            new Map([
              [owners.name, owners.value],
              [peer.name, value],
            ]),
          );
        touched[t].add(key);
      }
    }
  }

  /** Drops what `name` owned, marking its keys as touched. */
  #forget(name: string, touched: Record<Table, Set<string>>): void {
    const old = this.#peers.get(name);
    if (!old) return;
    this.#peers.delete(name);
    for (const t of TABLES) {
      const table = this.#owners[t];
      for (const key of old.entries[t].keys()) {
        const owners = table.get(key);
        if (owners instanceof Map) {
          owners.delete(name);
          const [only, more] = owners;
          if (only === undefined) table.delete(key);
          else if (more === undefined) table.set(key, { name: only[0], value: only[1] });
        } else if (owners?.name === name) {
          table.delete(key);
        }
        touched[t].add(key);
      }
    }
  }

  #want(t: Table, key: string): string | undefined {
    const owners = this.#owners[t].get(key);
    if (owners === undefined) return undefined;
    if (!(owners instanceof Map)) return owners.value;
    let best: string | undefined;
    for (const name of owners.keys()) if (best === undefined || name < best) best = name;
    return best === undefined ? undefined : owners.get(best);
  }

  /** The kernel's entries of the device: podwire's routes; neighbours and FDB remotes when owned. */
  #dump(): Record<Table, Map<string, string>> {
    const { nl } = this.#o;
    const index = this.#o.index();
    const have: Record<Table, Map<string, string>> = { routes: new Map(), neighs: new Map(), fdb: new Map() };
    for (const family of [AF_INET, AF_INET6]) {
      for (const r of nl.routes({ family, oif: index })) {
        if (r.protocol !== RTPROT_PODWIRE || r.dst === undefined) continue;
        have.routes.set(r.dst, r.gateway ?? '');
      }
    }
    if (this.#o.ownsNeighbours) {
      // A neighbour without a MAC, or an FDB MAC with a second remote, never equals a wanted value,
      // so it is replaced (or deleted).
      for (const n of nl.neighbours({ index })) have.neighs.set(n.address, n.mac ?? '');
      for (const e of nl.fdb({ index })) {
        if (e.dst === undefined) continue;
        const before = have.fdb.get(e.mac);
        have.fdb.set(e.mac, before === undefined ? e.dst : `${before} ${e.dst}`);
      }
    }
    return have;
  }

  /** Sends the requests that make each touched key hold its wanted value, given what it `have`s. */
  async #send(
    have: Record<Table, Map<string, string>>,
    touched: Record<Table, Set<string>>,
  ): Promise<string[]> {
    const index = this.#o.index();
    const first: BatchRequest[] = []; // route deletions: no route leads to an entry that goes
    const middle: BatchRequest[] = []; // FDB, then neighbours, then routes: a new route finds its L2 ready
    const neighs: BatchRequest[] = [];
    const routes: BatchRequest[] = [];
    const last: BatchRequest[] = []; // neighbour and FDB deletions
    /** What each request does to the programmed tables once the kernel has accepted it. */
    const effects: Array<() => void> = [];
    const firstEffects: Array<() => void> = [];
    const neighEffects: Array<() => void> = [];
    const routeEffects: Array<() => void> = [];
    const lastEffects: Array<() => void> = [];
    const programmed = this.#programmed;
    for (const dst of touched.routes) {
      const want = this.#want('routes', dst);
      const got = have.routes.get(dst);
      if (want === got) continue;
      const family = familyOf(dst);
      if (got !== undefined) {
        first.push(routeDeleteRequest({ family, dst, gateway: got || undefined, oif: index }));
        firstEffects.push(() => programmed.routes.delete(dst));
      }
      if (want !== undefined) {
        routes.push(
          routeAddRequest({
            family,
            dst,
            gateway: want,
            oif: index,
            onlink: this.#o.onlink,
            protocol: RTPROT_PODWIRE,
          }),
        );
        routeEffects.push(() => programmed.routes.set(dst, want));
      }
    }
    if (this.#o.ownsNeighbours) {
      for (const mac of touched.fdb) {
        const want = this.#want('fdb', mac);
        const got = have.fdb.get(mac);
        if (want === got) continue;
        const remotes = got === undefined ? [] : got.split(' ');
        if (want !== undefined) {
          // Replace rewrites the entry's first remote; any other remote goes below.
          middle.push(setFdbRequest({ index, mac, dst: want }));
          effects.push(() => programmed.fdb.set(mac, want));
          remotes.shift();
        }
        for (const dst of remotes) {
          if (dst === want) continue;
          last.push(deleteFdbRequest({ index, mac, dst }));
          lastEffects.push(want === undefined ? () => programmed.fdb.delete(mac) : () => {});
        }
      }
      for (const address of touched.neighs) {
        const want = this.#want('neighs', address);
        const got = have.neighs.get(address);
        if (want === got) continue;
        if (want !== undefined) {
          neighs.push(setNeighRequest({ index, address, mac: want }));
          neighEffects.push(() => programmed.neighs.set(address, want));
        } else {
          last.push(deleteNeighRequest({ index, address }));
          lastEffects.push(() => programmed.neighs.delete(address));
        }
      }
    }
    const requests = [...first, ...middle, ...neighs, ...routes, ...last];
    const allEffects = [...firstEffects, ...effects, ...neighEffects, ...routeEffects, ...lastEffects];
    const failures = await this.#o.nl.batch(requests);
    const failed = new Set<number>();
    const errors: string[] = [];
    for (const f of failures) {
      if (alreadyGone(f.error)) continue;
      failed.add(f.index);
      errors.push(f.error.message);
    }
    for (const [i, effect] of allEffects.entries()) {
      // A refused request leaves its key unknown until the next full converge reads the kernel.
      if (!failed.has(i)) effect();
    }
    return errors;
  }
}
