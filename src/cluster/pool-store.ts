/**
 * The pool seam: IP pools and the cluster-wide claims of their addresses. `EtcdPoolStore` keeps both in
 * etcd; a claim is one key per address created with a transaction that succeeds only while the key
 * does not exist (create_revision == 0), so of any number of nodes racing for one address exactly one
 * gets it. Stores without cluster-wide transactions (the static file) offer no pools.
 *
 * Errors: ERR_STORE naming the operation; a missing pool is ERR_INVALID_CONFIG naming it.
 */
import type { IpPool } from './ip-pool.js';
import type { OpOptions } from './store.js';

/** Who holds a pool address. */
export interface PoolClaimOwner {
  node: string;
  containerId: string;
  ifname: string;
  pod?: string;
  createdAt: string;
}

export interface PoolClaim {
  ip: string;
  owner: PoolClaimOwner;
  /** Opaque; a release compares it, so it never removes a claim someone else re-made meanwhile. */
  version: string;
}

export interface PoolStore {
  /** Creates the pool; false when one of that name exists. */
  createPool(pool: IpPool, opts?: OpOptions): Promise<boolean>;
  getPool(name: string, opts?: OpOptions): Promise<IpPool | undefined>;
  listPools(opts?: OpOptions): Promise<IpPool[]>;
  /** Deletes the pool if no address of it is claimed; throws ERR_STORE naming the holders otherwise. */
  deletePool(name: string, opts?: OpOptions): Promise<boolean>;
  /** Claims `ip` in `pool` when nobody holds it: resolves the claim, or undefined when it is taken. */
  claim(pool: string, ip: string, owner: PoolClaimOwner, opts?: OpOptions): Promise<PoolClaim | undefined>;
  /** Removes the claim if it is still the one given (same version). Resolves whether it did. */
  release(pool: string, claim: PoolClaim, opts?: OpOptions): Promise<boolean>;
  /** The claim of one address, or undefined when nobody holds it. */
  claimOf(pool: string, ip: string, opts?: OpOptions): Promise<PoolClaim | undefined>;
  /** Every claim of the pool. */
  claims(pool: string, opts?: OpOptions): Promise<PoolClaim[]>;
}
