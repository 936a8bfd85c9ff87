/**
 * IP pools and their claims in etcd (see pool-store.ts). Keys under the store's prefix:
 *
 *   PREFIX/pools/NAME           -> IpPool as JSON
 *   PREFIX/pool-ips/NAME/IP     -> PoolClaimOwner as JSON (one key per held address)
 */
import { StoreError } from '../base/errors.js';
import { canonicalIp } from '../base/ip.js';
import type { EtcdKv, Kv } from './etcd-kv.js';
import { type IpPool, parseIpPool } from './ip-pool.js';
import type { PoolClaim, PoolClaimOwner, PoolStore } from './pool-store.js';
import { type OpOptions, storeError } from './store.js';

export class EtcdPoolStore implements PoolStore {
  readonly #kv: EtcdKv;
  readonly #prefix: string;
  readonly #where: string;
  /** The store's own error and health bookkeeping around each call. */
  readonly #op: <T>(what: string, fn: () => Promise<T>) => Promise<T>;

  constructor(
    kv: EtcdKv,
    prefix: string,
    where: string,
    op: <T>(what: string, fn: () => Promise<T>) => Promise<T>,
  ) {
    this.#kv = kv;
    this.#prefix = prefix;
    this.#where = where;
    this.#op = op;
  }

  #poolKey(name: string): string {
    return `${this.#prefix}/pools/${name}`;
  }
  #claimsPrefix(name: string): string {
    return `${this.#prefix}/pool-ips/${name}/`;
  }

  createPool(pool: IpPool, opts: OpOptions = {}): Promise<boolean> {
    const p = parseIpPool(pool, `${this.#where}: createPool`).pool;
    return this.#op('createPool', async () => {
      const key = this.#poolKey(p.name);
      const res = await this.#kv.txn(
        { compare: [{ key, createRevision: '0' }], success: [{ put: key, value: JSON.stringify(p) }] },
        opts.signal,
      );
      return res.succeeded;
    });
  }

  getPool(name: string, opts: OpOptions = {}): Promise<IpPool | undefined> {
    return this.#op('getPool', async () => {
      const kv = (await this.#kv.range(this.#poolKey(name), opts)).kvs[0];
      return kv === undefined ? undefined : this.#decodePool(kv);
    });
  }

  listPools(opts: OpOptions = {}): Promise<IpPool[]> {
    return this.#op('listPools', async () => {
      const res = await this.#kv.range(`${this.#prefix}/pools/`, { prefix: true, ...opts });
      return res.kvs.map((kv) => this.#decodePool(kv)).sort((a, b) => a.name.localeCompare(b.name));
    });
  }

  deletePool(name: string, opts: OpOptions = {}): Promise<boolean> {
    return this.#op('deletePool', async () => {
      const held = await this.claims(name, opts);
      if (held.length > 0) {
        const who = held
          .slice(0, 5)
          .map((c) => `${c.ip} (${c.owner.node} ${c.owner.pod ?? c.owner.containerId})`);
        throw storeError(
          `${this.#where}: deletePool ${name}: ${held.length} address(es) still held: ${who.join(', ')}${held.length > 5 ? ', ...' : ''}`,
        );
      }
      const key = this.#poolKey(name);
      const res = await this.#kv.txn(
        { compare: [], success: [{ range: key }, { delete: key }] },
        opts.signal,
      );
      return (res.ranges[0]?.length ?? 0) > 0;
    });
  }

  claim(
    pool: string,
    ip: string,
    owner: PoolClaimOwner,
    opts: OpOptions = {},
  ): Promise<PoolClaim | undefined> {
    const canonical = canonicalIp(ip, 'pool address');
    return this.#op('claim', async () => {
      const key = `${this.#claimsPrefix(pool)}${canonical}`;
      // The whole point: create only while absent, decided by etcd, whoever else is racing.
      const res = await this.#kv.txn(
        { compare: [{ key, createRevision: '0' }], success: [{ put: key, value: JSON.stringify(owner) }] },
        opts.signal,
      );
      return res.succeeded ? { ip: canonical, owner, version: res.revision } : undefined;
    });
  }

  release(pool: string, claim: PoolClaim, opts: OpOptions = {}): Promise<boolean> {
    return this.#op('release', async () => {
      const key = `${this.#claimsPrefix(pool)}${claim.ip}`;
      const res = await this.#kv.txn(
        { compare: [{ key, modRevision: claim.version }], success: [{ delete: key }] },
        opts.signal,
      );
      return res.succeeded;
    });
  }

  claimOf(pool: string, ip: string, opts: OpOptions = {}): Promise<PoolClaim | undefined> {
    const canonical = canonicalIp(ip, 'pool address');
    return this.#op('claimOf', async () => {
      const kv = (await this.#kv.range(`${this.#claimsPrefix(pool)}${canonical}`, opts)).kvs[0];
      return kv === undefined
        ? undefined
        : { ip: canonical, owner: JSON.parse(kv.value) as PoolClaimOwner, version: kv.modRevision };
    });
  }

  claims(pool: string, opts: OpOptions = {}): Promise<PoolClaim[]> {
    return this.#op('claims', async () => {
      const prefix = this.#claimsPrefix(pool);
      const res = await this.#kv.range(prefix, { prefix: true, ...opts });
      return res.kvs.map((kv) => ({
        ip: kv.key.slice(prefix.length),
        owner: JSON.parse(kv.value) as PoolClaimOwner,
        version: kv.modRevision,
      }));
    });
  }

  #decodePool(kv: Kv): IpPool {
    try {
      return parseIpPool(JSON.parse(kv.value), kv.key).pool;
    } catch (err) {
      throw new StoreError(`${kv.key}: not a valid pool record`, { cause: err });
    }
  }
}
