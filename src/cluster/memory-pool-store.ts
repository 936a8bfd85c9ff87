/**
 * The in-memory fake of the pool seam (pool-store.ts), for tests of callers (the pool allocator, the
 * agent's pool IPAM). It passes the same compliance suite as EtcdPoolStore
 * (test/cluster/pool-store-compliance.ts). Several instances may share one `MemoryPoolBacking`, which
 * plays the part of the cluster's etcd: each instance is one node's client.
 */
import { canonicalIp } from '../base/ip.js';
import { type IpPool, parseIpPool } from './ip-pool.js';
import type { PoolClaim, PoolClaimOwner, PoolStore } from './pool-store.js';
import { type OpOptions, storeError, throwIfAborted } from './store.js';

interface HeldAddress {
  owner: PoolClaimOwner;
  version: string;
}

/** What the cluster holds: pools by name, and per pool the claims by canonical address. */
export interface MemoryPoolBacking {
  pools: Map<string, IpPool>;
  claims: Map<string, Map<string, HeldAddress>>;
  /** Bumped by every write, as etcd's revision; a claim's version is the revision that made it. */
  revision: number;
}

export function memoryPoolBacking(): MemoryPoolBacking {
  return { pools: new Map(), claims: new Map(), revision: 0 };
}

function copyPool(p: IpPool): IpPool {
  return { ...p, ranges: [...p.ranges], subnet: { ...p.subnet } };
}

export class MemoryPoolStore implements PoolStore {
  readonly backing: MemoryPoolBacking;
  readonly #where: string;

  constructor(backing: MemoryPoolBacking = memoryPoolBacking(), where = 'memory pool store') {
    this.backing = backing;
    this.#where = where;
  }

  createPool(pool: IpPool, opts: OpOptions = {}): Promise<boolean> {
    return this.#op('createPool', opts, () => {
      const p = parseIpPool(pool, `${this.#where}: createPool`).pool;
      if (this.backing.pools.has(p.name)) return false;
      this.backing.revision++;
      this.backing.pools.set(p.name, copyPool(p));
      return true;
    });
  }

  getPool(name: string, opts: OpOptions = {}): Promise<IpPool | undefined> {
    return this.#op('getPool', opts, () => {
      const p = this.backing.pools.get(name);
      return p === undefined ? undefined : copyPool(p);
    });
  }

  listPools(opts: OpOptions = {}): Promise<IpPool[]> {
    return this.#op('listPools', opts, () =>
      [...this.backing.pools.values()].map(copyPool).sort((a, b) => a.name.localeCompare(b.name)),
    );
  }

  deletePool(name: string, opts: OpOptions = {}): Promise<boolean> {
    return this.#op('deletePool', opts, () => {
      const held = [...(this.backing.claims.get(name) ?? new Map<string, HeldAddress>())];
      if (held.length > 0) {
        const who = held
          .slice(0, 5)
          .map(([ip, h]) => `${ip} (${h.owner.node} ${h.owner.pod ?? h.owner.containerId})`);
        throw storeError(
          `${this.#where}: deletePool ${name}: ${held.length} address(es) still held: ${who.join(', ')}${held.length > 5 ? ', ...' : ''}`,
        );
      }
      if (!this.backing.pools.delete(name)) return false;
      this.backing.revision++;
      return true;
    });
  }

  claim(
    pool: string,
    ip: string,
    owner: PoolClaimOwner,
    opts: OpOptions = {},
  ): Promise<PoolClaim | undefined> {
    return this.#op('claim', opts, () => {
      const canonical = canonicalIp(ip, 'pool address');
      let claims = this.backing.claims.get(pool);
      if (claims === undefined) {
        claims = new Map();
        this.backing.claims.set(pool, claims);
      }
      if (claims.has(canonical)) return undefined;
      this.backing.revision++;
      const version = String(this.backing.revision);
      claims.set(canonical, { owner: { ...owner }, version });
      return { ip: canonical, owner: { ...owner }, version };
    });
  }

  release(pool: string, claim: PoolClaim, opts: OpOptions = {}): Promise<boolean> {
    return this.#op('release', opts, () => {
      const claims = this.backing.claims.get(pool);
      const held = claims?.get(claim.ip);
      if (claims === undefined || held === undefined || held.version !== claim.version) return false;
      claims.delete(claim.ip);
      if (claims.size === 0) this.backing.claims.delete(pool);
      this.backing.revision++;
      return true;
    });
  }

  claimOf(pool: string, ip: string, opts: OpOptions = {}): Promise<PoolClaim | undefined> {
    return this.#op('claimOf', opts, () => {
      const canonical = canonicalIp(ip, 'pool address');
      const held = this.backing.claims.get(pool)?.get(canonical);
      return held === undefined
        ? undefined
        : { ip: canonical, owner: { ...held.owner }, version: held.version };
    });
  }

  claims(pool: string, opts: OpOptions = {}): Promise<PoolClaim[]> {
    return this.#op('claims', opts, () =>
      [...(this.backing.claims.get(pool) ?? new Map<string, HeldAddress>())].map(([ip, h]) => ({
        ip,
        owner: { ...h.owner },
        version: h.version,
      })),
    );
  }

  /**
   * Runs `step` after one turn of the event loop, as a request to etcd would, so that callers'
   * interleavings are exercised; the step itself is atomic, as an etcd transaction is.
   */
  #op<T>(what: string, opts: OpOptions, step: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      setImmediate(() => {
        try {
          throwIfAborted(opts.signal, `${this.#where}: ${what}`);
          resolve(step());
        } catch (err) {
          reject(err);
        }
      });
    });
  }
}
