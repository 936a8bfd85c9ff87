/**
 * The in-memory fake of the IPAM store seam, for tests of callers. It passes the same compliance
 * suite as FileStore. Several instances may share one `MemoryBacking`, which plays the part of a
 * store that outlives a process (a reopened directory, an etcd cluster).
 */

import {
  type AllocationRecord,
  type AttachmentKey,
  checkKey,
  checkRangeId,
  checkRecord,
  closedError,
  type IpamStore,
  isOwner,
  type StoredClaim,
} from './store.js';

/** rangeId -> canonical ip -> record. Records are never handed out by reference. */
export type MemoryBacking = Map<string, Map<string, AllocationRecord>>;

export class MemoryStore implements IpamStore {
  readonly backing: MemoryBacking;
  #closed = false;

  constructor(backing: MemoryBacking = new Map()) {
    this.backing = backing;
  }

  async claim(rangeId: string, ip: string, rec: AllocationRecord): Promise<boolean> {
    this.#checkOpen();
    const key = checkKey(rangeId, ip);
    const record = checkRecord(rec);
    // Yield once, as a real store would, so that callers' interleavings are exercised.
    await Promise.resolve();
    this.#checkOpen();
    let range = this.backing.get(rangeId);
    if (range === undefined) {
      range = new Map();
      this.backing.set(rangeId, range);
    }
    if (range.has(key)) return false;
    range.set(key, { ...record });
    return true;
  }

  async release(rangeId: string, ip: string, owner: AttachmentKey): Promise<boolean> {
    this.#checkOpen();
    const key = checkKey(rangeId, ip);
    await Promise.resolve();
    this.#checkOpen();
    const range = this.backing.get(rangeId);
    const rec = range?.get(key);
    if (range === undefined || rec === undefined || !isOwner(rec, owner)) return false;
    range.delete(key);
    if (range.size === 0) this.backing.delete(rangeId);
    return true;
  }

  async list(rangeId: string): Promise<StoredClaim[]> {
    this.#checkOpen();
    checkRangeId(rangeId);
    const range = this.backing.get(rangeId) ?? new Map<string, AllocationRecord>();
    return [...range].map(([ip, rec]) => ({ ip, rec: { ...rec } }));
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  #checkOpen(): void {
    if (this.#closed) throw closedError();
  }
}
