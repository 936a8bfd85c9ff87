/**
 * An IpamStore that forwards every call to a real one and fails the calls a FaultPlan names (the
 * fault-injecting seam fake beside FileStore and MemoryStore). Op names: "PREFIX.claim",
 * "PREFIX.release", "PREFIX.list" (PREFIX "store" unless given). `after` on claim is the store's
 * documented "rejected, but may have taken effect" case.
 */
import type { AllocationRecord, AttachmentKey, ClaimListing, IpamStore } from '../../src/ipam/store.js';
import type { FaultPlan } from '../agent/fault/fault-plan.js';

export class FaultyIpamStore implements IpamStore {
  readonly #inner: IpamStore;
  readonly #plan: FaultPlan;
  readonly #prefix: string;

  constructor(inner: IpamStore, plan: FaultPlan, prefix = 'store') {
    this.#inner = inner;
    this.#plan = plan;
    this.#prefix = prefix;
  }

  claim(rangeId: string, ip: string, rec: AllocationRecord): Promise<boolean> {
    return this.#plan.wrap(`${this.#prefix}.claim`, 'ERR_STORE', () => this.#inner.claim(rangeId, ip, rec));
  }
  release(rangeId: string, ip: string, owner: AttachmentKey): Promise<boolean> {
    return this.#plan.wrap(`${this.#prefix}.release`, 'ERR_STORE', () =>
      this.#inner.release(rangeId, ip, owner),
    );
  }
  adoptNetwork(rangeId: string, ip: string, owner: AttachmentKey, network: string): Promise<boolean> {
    return this.#plan.wrap(`${this.#prefix}.adoptNetwork`, 'ERR_STORE', () =>
      this.#inner.adoptNetwork(rangeId, ip, owner, network),
    );
  }
  list(rangeId: string): Promise<ClaimListing> {
    return this.#plan.wrap(`${this.#prefix}.list`, 'ERR_STORE', () => this.#inner.list(rangeId));
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
}
