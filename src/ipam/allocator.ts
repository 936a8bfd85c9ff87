/**
 * Node-local IPAM: one pod CIDR per family for this node, addresses claimed in an IpamStore.
 *
 * The store's claim is the arbiter: an address is handed out only after the store said it is
 * ours (and durably so). The in-memory RangeState index and cursor only choose candidates, so
 * that concurrent calls in this process try different addresses and nobody rescans from the
 * start. Calls for one attachment (containerId, ifname) run one at a time.
 */

import {
  AlreadyAllocatedError,
  errorWithCode,
  InvalidConfigError,
  IpamExhaustedError,
  PodwireError,
  StoreError,
} from '../base/errors.js';
import type { IpFamily } from '../base/ip.js';
import { type Cidr, parseCidr } from './cidr.js';
import { KeyedMutex } from './keyed-mutex.js';
import { RangeState } from './range-state.js';
import {
  type AllocationRecord,
  type AttachmentKey,
  attachmentKey,
  type IpamStore,
  type UnreadableClaim,
} from './store.js';

export interface Allocation {
  /** Canonical address text. */
  ip: string;
  prefixLength: number;
  gateway: string;
  family: IpFamily;
  /** The range's canonical CIDR text. */
  rangeId: string;
  /** The VLAN of the pool the address came from (1-4094), set only when it has one, and only by ADD. */
  vlan?: number;
}

/** An allocation with its owner's record (containerId, ifname, createdAt). */
export interface OwnedAllocation extends Allocation, AllocationRecord {}

export interface RangeUsage {
  rangeId: string;
  /** Addresses pods can receive (network, gateway and broadcast excluded). */
  size: bigint;
  /** Addresses taken: held by pods, plus unreadable claims. */
  used: number;
  /** Of `used`: claims the store cannot read (taken, owner unknown). */
  unreadable: number;
}

/** A claim the store cannot read, with its range: taken, owner unknown, never handed out or released. */
export interface UnreadableAllocation extends UnreadableClaim {
  rangeId: string;
}

export interface NodeLocalAllocatorOptions {
  /** Clock for AllocationRecord.createdAt; tests may pin it. */
  now?: () => Date;
  /**
   * Told each unreadable claim once, when a listing (open, `list`) first shows it; again only if it
   * disappears and comes back. The agent logs a warning naming the file.
   */
  onUnreadable?: (claim: UnreadableAllocation) => void;
}

export class NodeLocalAllocator {
  readonly #store: IpamStore;
  readonly #ranges: readonly RangeState[];
  readonly #now: () => Date;
  readonly #onUnreadable: (claim: UnreadableAllocation) => void;
  readonly #attachments = new KeyedMutex();

  private constructor(store: IpamStore, ranges: RangeState[], options: NodeLocalAllocatorOptions) {
    this.#store = store;
    this.#ranges = ranges;
    this.#now = options.now ?? (() => new Date());
    this.#onUnreadable = options.onUnreadable ?? (() => undefined);
  }

  /**
   * Validates this node's pod CIDRs (one or two, at most one per family; ERR_INVALID_CONFIG) and
   * loads the existing claims from `store`. The caller owns the store: it opens and closes it.
   */
  static async open(
    podCidrs: readonly string[],
    store: IpamStore,
    options: NodeLocalAllocatorOptions = {},
  ): Promise<NodeLocalAllocator> {
    const cidrs = parsePodCidrs(podCidrs);
    const listed: Array<{ range: RangeState; unreadable: UnreadableClaim[] }> = [];
    for (const cidr of cidrs) {
      const { claims, unreadable } = await store.list(cidr.text);
      listed.push({ range: new RangeState(cidr, claims), unreadable });
    }
    const allocator = new NodeLocalAllocator(
      store,
      listed.map((l) => l.range),
      options,
    );
    for (const { range, unreadable } of listed) allocator.#noteUnreadable(range, unreadable);
    return allocator;
  }

  #noteUnreadable(range: RangeState, listed: readonly UnreadableClaim[]): void {
    for (const c of range.setUnreadable(listed)) this.#onUnreadable({ ...c, rangeId: range.rangeId });
  }

  /** The ranges, in the order given at open. */
  get cidrs(): Cidr[] {
    return this.#ranges.map((r) => r.cidr);
  }

  /**
   * One address per range for the attachment. ERR_ALREADY_ALLOCATED if it already holds one;
   * ERR_IPAM_EXHAUSTED if a range is full. On any failure, the addresses claimed by this call are
   * released again before it rejects.
   */
  async allocate(
    attachment: AttachmentKey,
    meta: { pod?: string; network?: string } = {},
  ): Promise<Allocation[]> {
    const owner = checkAttachment(attachment);
    return this.#attachments.run(attachmentKey(owner), async () => {
      for (const range of this.#ranges) {
        const held = range.ipsOf(owner);
        if (held.length > 0) {
          throw new AlreadyAllocatedError(
            `container ${owner.containerId} interface ${owner.ifname} already holds ${held.join(', ')} in ${range.rangeId}`,
          );
        }
      }
      const rec: AllocationRecord = { ...owner, createdAt: this.#now().toISOString() };
      if (meta.pod !== undefined) rec.pod = meta.pod;
      if (meta.network !== undefined) rec.network = meta.network;
      const done: Allocation[] = [];
      for (const range of this.#ranges) {
        try {
          done.push(toAllocation(range, await this.#claimIn(range, rec)));
        } catch (err) {
          throw await this.#rollback(done, owner, err);
        }
      }
      return done;
    });
  }

  /**
   * Releases every address the attachment holds and returns them; [] when it holds none. If some
   * releases fail, the others still happen and the failed ones stay held (a retry frees them).
   */
  async release(attachment: AttachmentKey): Promise<Allocation[]> {
    const owner = checkAttachment(attachment);
    return this.#attachments.run(attachmentKey(owner), async () => {
      const released: Allocation[] = [];
      const failures: unknown[] = [];
      for (const range of this.#ranges) {
        for (const ip of range.ipsOf(owner)) {
          try {
            await this.#releaseOne(range, ip, owner);
            released.push(toAllocation(range, ip));
          } catch (err) {
            failures.push(err);
          }
        }
      }
      if (failures.length > 0) {
        throw new StoreError(
          `releasing the addresses of container ${owner.containerId} interface ${owner.ifname} failed`,
          { cause: new AggregateError(failures, 'release failures') },
        );
      }
      return released;
    });
  }

  /** The attachment's current allocations, as this allocator knows them. */
  lookup(attachment: AttachmentKey): Allocation[] {
    const owner = checkAttachment(attachment);
    return this.#ranges.flatMap((range) => range.ipsOf(owner).map((ip) => toAllocation(range, ip)));
  }

  /** The attachment's current allocations with their records (the network they are recorded with). */
  owned(attachment: AttachmentKey): OwnedAllocation[] {
    const owner = checkAttachment(attachment);
    return this.#ranges.flatMap((range) =>
      range.ipsOf(owner).flatMap((ip) => {
        const rec = range.held.get(ip);
        return rec === undefined ? [] : [{ ...toAllocation(range, ip), ...rec }];
      }),
    );
  }

  /**
   * Records `network` in the attachment's legacy claims (store.ts, `adoptNetwork`); a claim that names a
   * network already keeps it. Returns the addresses whose record changed.
   */
  async adoptNetwork(attachment: AttachmentKey, network: string): Promise<string[]> {
    const owner = checkAttachment(attachment);
    return this.#attachments.run(attachmentKey(owner), async () => {
      const adopted: string[] = [];
      for (const range of this.#ranges) {
        for (const ip of range.ipsOf(owner)) {
          const rec = range.held.get(ip);
          if (rec === undefined || rec.network !== undefined) continue;
          if (await this.#store.adoptNetwork(range.rangeId, ip, owner, network)) {
            range.add(ip, { ...rec, network });
            adopted.push(ip);
          }
        }
      }
      return adopted;
    });
  }

  /** Per range: how many addresses pods can receive and how many this allocator knows are taken. */
  usage(): RangeUsage[] {
    return this.#ranges.map((r) => ({
      rangeId: r.rangeId,
      size: r.cidr.assignableCount,
      used: r.used,
      unreadable: r.unreadable.length,
    }));
  }

  /**
   * Every readable claim in the node's ranges, read from the store, with its owner (for reconcile and
   * GC). Claims the store cannot read are not among them (they have no owner to judge): `unreadable`
   * names them, as of this listing.
   */
  async list(): Promise<OwnedAllocation[]> {
    const out: OwnedAllocation[] = [];
    for (const range of this.#ranges) {
      const { claims, unreadable } = await this.#store.list(range.rangeId);
      range.refreshForeign(claims);
      this.#noteUnreadable(range, unreadable);
      for (const { ip, rec } of claims) out.push({ ...toAllocation(range, ip), ...rec });
    }
    return out;
  }

  /** The claims the store could not read at the last listing (open or `list`): taken, owner unknown. */
  unreadable(): UnreadableAllocation[] {
    return this.#ranges.flatMap((r) => r.unreadable.map((c) => ({ ...c, rangeId: r.rangeId })));
  }

  /** Claims the next free candidate of the range, trying further ones when the store refuses. */
  async #claimIn(range: RangeState, rec: AllocationRecord): Promise<string> {
    for (;;) {
      const ip = range.takeCandidate();
      if (ip === undefined) {
        throw new IpamExhaustedError(`no free address left in ${range.rangeId}`);
      }
      let claimed: boolean;
      try {
        claimed = await this.#store.claim(range.rangeId, ip, rec);
      } catch (err) {
        // A claim that failed may still have happened: releasing it as its owner settles that.
        try {
          await this.#store.release(range.rangeId, ip, rec);
        } catch (releaseErr) {
          range.settleCandidate(ip, rec, true); // may be ours: keep it, so that a later release frees it
          throw new StoreError(`claiming ${ip} in ${range.rangeId} failed, state unknown`, {
            cause: new AggregateError([err, releaseErr], 'claim and settling release both failed'),
          });
        }
        range.settleCandidate(ip, rec, undefined);
        throw err;
      }
      range.settleCandidate(ip, rec, claimed);
      if (claimed) return ip;
    }
  }

  async #releaseOne(range: RangeState, ip: string, owner: AttachmentKey): Promise<void> {
    // false means another attachment or writer holds it now, or it is gone: not ours either way.
    await this.#store.release(range.rangeId, ip, owner);
    range.remove(ip);
  }

  /** Releases what this call claimed; returns the error to throw (the original, or both). */
  async #rollback(done: readonly Allocation[], owner: AttachmentKey, err: unknown): Promise<unknown> {
    const failures: unknown[] = [];
    for (const allocation of [...done].reverse()) {
      const range = this.#ranges.find((r) => r.rangeId === allocation.rangeId);
      if (range === undefined) continue;
      try {
        await this.#releaseOne(range, allocation.ip, owner);
      } catch (releaseErr) {
        failures.push(releaseErr);
      }
    }
    if (failures.length === 0) return err;
    const code = err instanceof PodwireError ? err.code : 'ERR_STORE';
    const msg = err instanceof Error ? err.message : String(err);
    return errorWithCode(code, `${msg}; rolling back the addresses already claimed also failed`, {
      cause: new AggregateError([err, ...failures], 'allocation and rollback failures'),
    });
  }
}

function toAllocation(range: RangeState, ip: string): Allocation {
  const { cidr } = range;
  return {
    ip,
    prefixLength: cidr.prefixLength,
    gateway: cidr.format(cidr.gateway),
    family: cidr.family,
    rangeId: range.rangeId,
  };
}

function checkAttachment(attachment: AttachmentKey): AttachmentKey {
  const { containerId, ifname } = attachment ?? {};
  if (typeof containerId !== 'string' || containerId === '' || typeof ifname !== 'string' || ifname === '') {
    throw new InvalidConfigError(
      `invalid attachment ${JSON.stringify(attachment)}: containerId and ifname must be non-empty strings`,
    );
  }
  return { containerId, ifname };
}

/** Parses the node's pod CIDRs: one or two, at most one per family. */
export function parsePodCidrs(podCidrs: readonly string[]): Cidr[] {
  if (!Array.isArray(podCidrs) || podCidrs.length === 0) {
    throw new InvalidConfigError(`invalid podCIDRs ${JSON.stringify(podCidrs)}: need at least one CIDR`);
  }
  const cidrs = podCidrs.map((text, i) => parseCidr(text, `podCIDRs[${i}]`));
  for (const family of [4, 6] as const) {
    const same = cidrs.filter((c) => c.family === family);
    if (same.length > 1) {
      throw new InvalidConfigError(
        `invalid podCIDRs ${JSON.stringify(podCidrs)}: at most one IPv${family} CIDR per node, got ${same.map((c) => c.text).join(', ')}`,
      );
    }
  }
  return cidrs;
}
