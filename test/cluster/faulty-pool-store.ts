/**
 * A PoolStore that forwards every call to a real one and fails the calls a FaultPlan names (the
 * fault-injecting seam fake beside EtcdPoolStore and MemoryPoolStore). Op names: "pools.METHOD".
 * `after` is a request whose answer was lost: etcd did it, the caller hears an error.
 */
import type { IpPool } from '../../src/cluster/ip-pool.js';
import type { PoolClaim, PoolClaimOwner, PoolStore } from '../../src/cluster/pool-store.js';
import type { OpOptions } from '../../src/cluster/store.js';
import type { FaultPlan } from '../agent/fault/fault-plan.js';

export class FaultyPoolStore implements PoolStore {
  readonly #inner: PoolStore;
  readonly #plan: FaultPlan;

  constructor(inner: PoolStore, plan: FaultPlan) {
    this.#inner = inner;
    this.#plan = plan;
  }

  #call<T>(method: string, call: () => Promise<T>): Promise<T> {
    return this.#plan.wrap(`pools.${method}`, 'ERR_STORE', call);
  }

  createPool(pool: IpPool, opts?: OpOptions): Promise<boolean> {
    return this.#call('createPool', () => this.#inner.createPool(pool, opts));
  }
  getPool(name: string, opts?: OpOptions): Promise<IpPool | undefined> {
    return this.#call('getPool', () => this.#inner.getPool(name, opts));
  }
  listPools(opts?: OpOptions): Promise<IpPool[]> {
    return this.#call('listPools', () => this.#inner.listPools(opts));
  }
  deletePool(name: string, opts?: OpOptions): Promise<boolean> {
    return this.#call('deletePool', () => this.#inner.deletePool(name, opts));
  }
  claim(pool: string, ip: string, owner: PoolClaimOwner, opts?: OpOptions): Promise<PoolClaim | undefined> {
    return this.#call('claim', () => this.#inner.claim(pool, ip, owner, opts));
  }
  release(pool: string, claim: PoolClaim, opts?: OpOptions): Promise<boolean> {
    return this.#call('release', () => this.#inner.release(pool, claim, opts));
  }
  claimOf(pool: string, ip: string, opts?: OpOptions): Promise<PoolClaim | undefined> {
    return this.#call('claimOf', () => this.#inner.claimOf(pool, ip, opts));
  }
  claims(pool: string, opts?: OpOptions): Promise<PoolClaim[]> {
    return this.#call('claims', () => this.#inner.claims(pool, opts));
  }
}
