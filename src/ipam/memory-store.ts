/**
 * The in-memory fake of the IPAM store seam, for tests of callers. It passes the same compliance
 * suite as FileStore. Several instances may share one `MemoryBacking`, which plays the part of a
 * store that outlives a process (a reopened directory, an etcd cluster).
 */

import {
  type AllocationRecord,
  type AttachmentKey,
  type ClaimListing,
  checkKey,
  checkRangeId,
  checkRecord,
  closedError,
  type IpamStore,
  isOwner,
} from './store.js';

/** rangeId -> canonical ip -> record. Records are never handed out by reference. */
export type MemoryBacking = Map<string, Map<string, AllocationRecord>>;

export class MemoryStore implements IpamStore {
  readonly backing: MemoryBacking;
  #closed = false;
  /** Operations started and not yet settled; `close` waits for them. */
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(backing: MemoryBacking = new Map()) {
    this.backing = backing;
  }

  claim(rangeId: string, ip: string, rec: AllocationRecord): Promise<boolean> {
    return this.#op(() => {
      const key = checkKey(rangeId, ip);
      const record = checkRecord(rec);
      let range = this.backing.get(rangeId);
      if (range === undefined) {
        range = new Map();
        this.backing.set(rangeId, range);
      }
      if (range.has(key)) return false;
      range.set(key, { ...record });
      return true;
    });
  }

  release(rangeId: string, ip: string, owner: AttachmentKey): Promise<boolean> {
    return this.#op(() => {
      const key = checkKey(rangeId, ip);
      const range = this.backing.get(rangeId);
      const rec = range?.get(key);
      if (range === undefined || rec === undefined || !isOwner(rec, owner)) return false;
      range.delete(key);
      if (range.size === 0) this.backing.delete(rangeId);
      return true;
    });
  }

  adoptNetwork(rangeId: string, ip: string, owner: AttachmentKey, network: string): Promise<boolean> {
    return this.#op(() => {
      const key = checkKey(rangeId, ip);
      const rec = this.backing.get(rangeId)?.get(key);
      if (rec === undefined || !isOwner(rec, owner) || rec.network !== undefined) return false;
      const adopted = checkRecord({ ...rec, network });
      this.backing.get(rangeId)?.set(key, adopted);
      return true;
    });
  }

  /** Records in memory are always readable: `unreadable` is empty. */
  list(rangeId: string): Promise<ClaimListing> {
    return this.#op(() => {
      checkRangeId(rangeId);
      const range = this.backing.get(rangeId) ?? new Map<string, AllocationRecord>();
      return { claims: [...range].map(([ip, rec]) => ({ ip, rec: { ...rec } })), unreadable: [] };
    });
  }

  /** Refuses new calls, then waits for those in flight. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#inFlight]);
  }

  /**
   * Runs `step` after one turn of the event loop, as a real store's I/O would, so that callers'
   * interleavings are exercised; the step itself is atomic.
   */
  async #op<T>(step: () => T): Promise<T> {
    if (this.#closed) throw closedError();
    const p = new Promise<T>((resolve, reject) => {
      setImmediate(() => {
        try {
          resolve(step());
        } catch (err) {
          reject(err);
        }
      });
    });
    this.#inFlight.add(p);
    try {
      return await p;
    } finally {
      this.#inFlight.delete(p);
    }
  }
}
