/**
 * The allocator's in-memory view of one range: who holds what, which claims are in flight, and
 * where to look next. The store stays the arbiter; this index only saves rescans and store reads.
 *
 * Invariants:
 * - `held` and `byOwner` describe the same claims: ip in held with owner k <=> ip in byOwner(k).
 * - An address is in at most one of `held`, `pending`, `foreign`. `unreadable` addresses are never
 *   candidates; one may also be in `held` (a record of ours damaged since it was read).
 * - `cursor` is always an assignable address of the range.
 */

import { parseIp } from '../base/ip.js';
import type { Cidr } from './cidr.js';
import {
  type AllocationRecord,
  type AttachmentKey,
  attachmentKey,
  type StoredClaim,
  type UnreadableClaim,
} from './store.js';

export class RangeState {
  readonly cidr: Cidr;
  /** The range id in the store: the canonical CIDR text. */
  readonly rangeId: string;
  /** Claims in the store made by or loaded into this allocator: canonical ip -> record. */
  readonly held = new Map<string, AllocationRecord>();
  /** attachmentKey -> the ips it holds here (normally one). */
  readonly #byOwner = new Map<string, Set<string>>();
  /** Candidates whose claim is in flight; no other call may try them. */
  readonly #pending = new Set<string>();
  /** Addresses the store refused although not in `held`: claimed by another writer of the store. */
  readonly #foreign = new Set<string>();
  /** Claims the store holds but cannot read, by ip, as of the last listing: taken, owner unknown. */
  #unreadable = new Map<string, UnreadableClaim>();
  /** The next candidate (host-local's "last reserved + 1"). */
  #cursor: bigint;

  constructor(cidr: Cidr, loaded: readonly StoredClaim[]) {
    this.cidr = cidr;
    this.rangeId = cidr.text;
    this.#cursor = cidr.firstAssignable;
    let newest: { createdAt: string; value: bigint } | undefined;
    for (const { ip, rec } of loaded) {
      this.add(ip, rec);
      const parsed = parseIp(ip);
      if (parsed === undefined || parsed.family !== cidr.family || !cidr.isAssignable(parsed.value)) continue;
      if (newest === undefined || rec.createdAt > newest.createdAt)
        newest = { createdAt: rec.createdAt, value: parsed.value };
    }
    // Resume after the newest surviving claim instead of rescanning from the start. host-local
    // persists its last reserved address; deriving it keeps the store seam small, at the price of
    // reusing sooner an address released just before a restart.
    if (newest !== undefined) this.#cursor = cidr.nextAssignable(newest.value);
  }

  /** The ips the attachment holds in this range. */
  ipsOf(owner: AttachmentKey): string[] {
    return [...(this.#byOwner.get(attachmentKey(owner)) ?? [])];
  }

  add(ip: string, rec: AllocationRecord): void {
    this.held.set(ip, rec);
    this.#foreign.delete(ip);
    const key = attachmentKey(rec);
    let ips = this.#byOwner.get(key);
    if (ips === undefined) {
      ips = new Set();
      this.#byOwner.set(key, ips);
    }
    ips.add(ip);
  }

  remove(ip: string): void {
    const rec = this.held.get(ip);
    if (rec === undefined) return;
    this.held.delete(ip);
    const key = attachmentKey(rec);
    const ips = this.#byOwner.get(key);
    ips?.delete(ip);
    if (ips?.size === 0) this.#byOwner.delete(key);
  }

  /**
   * Picks the first free address from the cursor on, marks it pending and moves the cursor past
   * it; undefined when every assignable address is held, pending or foreign. Synchronous, so
   * concurrent callers never pick the same candidate.
   */
  takeCandidate(): string | undefined {
    for (const value of this.cidr.assignable(this.#cursor)) {
      const ip = this.cidr.format(value);
      if (this.held.has(ip) || this.#pending.has(ip) || this.#foreign.has(ip) || this.#unreadable.has(ip))
        continue;
      this.#pending.add(ip);
      this.#cursor = this.cidr.nextAssignable(value);
      return ip;
    }
    return undefined;
  }

  /** Ends a candidate's claim: `claimed` -> held by `rec`; false -> foreign; undefined -> unknown. */
  settleCandidate(ip: string, rec: AllocationRecord, claimed: boolean | undefined): void {
    this.#pending.delete(ip);
    if (claimed === true) this.add(ip, rec);
    else if (claimed === false) this.#foreign.add(ip);
  }

  /** The unreadable claims of the last listing. */
  get unreadable(): UnreadableClaim[] {
    return [...this.#unreadable.values()];
  }

  /** How many addresses are taken: held, plus unreadable ones not among them. */
  get used(): number {
    let n = this.held.size;
    for (const ip of this.#unreadable.keys()) if (!this.held.has(ip)) n++;
    return n;
  }

  /**
   * Replaces the unreadable claims with a fresh listing's; returns those not known before (each is
   * reported once, until a listing no longer shows it).
   */
  setUnreadable(listed: readonly UnreadableClaim[]): UnreadableClaim[] {
    const fresh = listed.filter((c) => !this.#unreadable.has(c.ip));
    this.#unreadable = new Map(listed.map((c) => [c.ip, c]));
    return fresh;
  }

  /**
   * Forgets foreign addresses that a fresh store listing no longer shows (their writer released
   * them). Only shrinks the set: a stale listing at worst costs one refused claim later.
   */
  refreshForeign(listed: readonly StoredClaim[]): void {
    const inStore = new Set(listed.map((c) => c.ip));
    for (const ip of this.#foreign) if (!inStore.has(ip)) this.#foreign.delete(ip);
  }
}
