/**
 * Pool allocation (flexible IPAM): a pod that names a pool gets an address that is unique across the
 * cluster. Order of an ADD: the cluster-wide claim first (an etcd transaction per address, create only
 * while absent), then the node's durable record of it (a FileStore under stateDir/pool-ipam), so:
 *
 * - a crash between the two leaves a cluster claim owned by this node without a local record, which
 *   `syncWithStore` (agent start) releases;
 * - the local record is what reconcile, GC and DEL work from; DEL releases the cluster claim first
 *   (compare on its revision, and only if it names this attachment), then the local record.
 *
 * The local range id carries what an allocation needs without asking the store: `pool/NAME/GW/PLEN`.
 */

import {
  AlreadyAllocatedError,
  InternalError,
  InvalidConfigError,
  IpamExhaustedError,
} from '../base/errors.js';
import { formatIp, parseIp } from '../base/ip.js';
import { type ParsedPool, parseIpPool, poolAddresses, poolContains } from '../cluster/ip-pool.js';
import type { PoolClaimOwner, PoolStore } from '../cluster/pool-store.js';
import type { Allocation, OwnedAllocation, RangeUsage, UnreadableAllocation } from './allocator.js';
import { KeyedMutex } from './keyed-mutex.js';
import { type AllocationRecord, type AttachmentKey, attachmentKey, type IpamStore } from './store.js';

export interface PoolRequest {
  pool: string;
  /** Where the pool name came from, for errors: "CNI_ARGS PODWIRE_POOL", "poolByNamespace.web". */
  poolSource: string;
  /** A fixed address the runtime asked for, and where it came from ("CNI_ARGS IP", "runtimeConfig.ips"). */
  ip?: { value: string; source: string };
  pod?: string;
  /** The CNI network name to record with the claim (store.ts, `AllocationRecord.network`). */
  network?: string;
}

interface Held {
  rangeId: string;
  pool: string;
  ip: string;
  prefixLength: number;
  gateway: string;
  rec: AllocationRecord;
}

export interface PoolAllocatorOptions {
  pools: PoolStore;
  /** The node's durable record of its pool addresses. */
  local: IpamStore;
  /** The range ids `local` holds records for (read once at open). */
  localRanges: string[];
  node: string;
  now?: () => Date;
  /**
   * Every registered node's underlay address, asked at each allocation (the cluster's node records).
   * A pod never gets one: both datapaths' guards would then let it speak as that node (failure 2 by a
   * legitimate claim).
   */
  nodeAddresses?: () => Promise<ReadonlyMap<string, string>>;
}

export function poolRangeId(p: ParsedPool): string {
  return `pool/${p.pool.name}/${p.pool.subnet.gateway}/${p.pool.subnet.prefixLength}`;
}

function parseRangeId(rangeId: string): { pool: string; gateway: string; prefixLength: number } | undefined {
  const [kind, pool, gateway, plen] = rangeId.split('/');
  if (kind !== 'pool' || !pool || !gateway || parseIp(gateway) === undefined || !plen) return undefined;
  return { pool, gateway, prefixLength: Number(plen) };
}

export class PoolAllocator {
  readonly #o: PoolAllocatorOptions;
  readonly #now: () => Date;
  readonly #mutex = new KeyedMutex();
  /** By attachmentKey: the pool address each attachment holds (at most one). */
  readonly #held = new Map<string, Held>();
  /**
   * Local records the store could not read at open: taken, owner unknown. Their cluster claims are
   * never released by `syncWithStore` (the address may be in use), so no other node gets them.
   */
  #unreadable: UnreadableAllocation[] = [];

  private constructor(o: PoolAllocatorOptions) {
    this.#o = o;
    this.#now = o.now ?? (() => new Date());
  }

  static async open(o: PoolAllocatorOptions): Promise<PoolAllocator> {
    const a = new PoolAllocator(o);
    for (const rangeId of o.localRanges) {
      const r = parseRangeId(rangeId);
      if (!r) continue;
      const { claims, unreadable } = await o.local.list(rangeId);
      for (const c of unreadable) a.#unreadable.push({ ...c, rangeId });
      for (const { ip, rec } of claims) {
        a.#held.set(attachmentKey(rec), {
          rangeId,
          pool: r.pool,
          ip,
          prefixLength: r.prefixLength,
          gateway: r.gateway,
          rec,
        });
      }
    }
    return a;
  }

  async allocate(att: AttachmentKey, req: PoolRequest): Promise<Allocation> {
    return this.#mutex.run(attachmentKey(att), async () => {
      const before = this.#held.get(attachmentKey(att));
      if (before)
        throw new AlreadyAllocatedError(
          `container ${att.containerId} interface ${att.ifname} already holds ${before.ip} in pool ${before.pool}`,
        );
      const stored = await this.#o.pools.getPool(req.pool);
      if (!stored)
        throw new InvalidConfigError(`${req.poolSource}: no IP pool named ${JSON.stringify(req.pool)}`);
      const pool = parseIpPool(stored, `pool ${req.pool}`);
      const createdAt = this.#now().toISOString();
      const owner: PoolClaimOwner = {
        node: this.#o.node,
        containerId: att.containerId,
        ifname: att.ifname,
        createdAt,
      };
      if (req.pod !== undefined) owner.pod = req.pod;
      const nodes = (await this.#o.nodeAddresses?.()) ?? new Map<string, string>();
      const claim = req.ip
        ? await this.#claimFixed(pool, req.ip, owner, nodes)
        : await this.#claimAny(pool, owner, nodes);
      const rangeId = poolRangeId(pool);
      const rec: AllocationRecord = { containerId: att.containerId, ifname: att.ifname, createdAt };
      if (req.pod !== undefined) rec.pod = req.pod;
      if (req.network !== undefined) rec.network = req.network;
      try {
        if (!(await this.#o.local.claim(rangeId, claim.ip, rec)))
          throw new InternalError(`pool ${req.pool}: ${claim.ip} already recorded on this node`);
      } catch (err) {
        // A local claim that rejected may still have happened: releasing it as its owner settles that.
        await this.#o.local.release(rangeId, claim.ip, att).catch(() => undefined);
        await this.#o.pools.release(req.pool, claim);
        throw err;
      }
      const held: Held = {
        rangeId,
        pool: req.pool,
        ip: claim.ip,
        prefixLength: pool.pool.subnet.prefixLength,
        gateway: pool.pool.subnet.gateway,
        rec,
      };
      this.#held.set(attachmentKey(att), held);
      const vlan = pool.pool.vlan;
      return vlan ? { ...toAllocation(held), vlan } : toAllocation(held);
    });
  }

  async #claimFixed(
    pool: ParsedPool,
    want: { value: string; source: string },
    owner: PoolClaimOwner,
    nodes: ReadonlyMap<string, string>,
  ) {
    const ip = parseIp(want.value);
    if (!ip || ip.family !== pool.family || !poolContains(pool, ip.value))
      throw new InvalidConfigError(
        `${want.source}: ${want.value} is not an address of pool ${pool.pool.name} (ranges ${pool.pool.ranges.join(', ')}; network, gateway and broadcast excluded)`,
      );
    const text = formatIp(ip.family, ip.value);
    const node = nodes.get(text);
    if (node !== undefined)
      throw new InvalidConfigError(
        `${want.source}: ${text} is the address of node ${node}; a pod may not take a node's address`,
      );
    const claim = await this.#claimOne(pool.pool.name, text, owner);
    if (claim) return claim;
    const holder = await this.#o.pools.claimOf(pool.pool.name, text);
    throw new AlreadyAllocatedError(
      `${want.source}: ${text} in pool ${pool.pool.name} is already held${holder ? ` by ${holder.owner.pod ?? holder.owner.containerId} on node ${holder.owner.node}` : ''}`,
    );
  }

  /**
   * One cluster claim. A claim that rejected may still have been made (its answer lost): if the store
   * now names this very call's owner, it is released before the error goes on.
   */
  async #claimOne(pool: string, ip: string, owner: PoolClaimOwner) {
    try {
      return await this.#o.pools.claim(pool, ip, owner);
    } catch (err) {
      const held = await this.#o.pools.claimOf(pool, ip).catch(() => undefined);
      const o = held?.owner;
      if (
        held &&
        o?.node === owner.node &&
        o.containerId === owner.containerId &&
        o.ifname === owner.ifname &&
        o.createdAt === owner.createdAt
      )
        await this.#o.pools.release(pool, held).catch(() => undefined);
      throw err;
    }
  }

  async #claimAny(pool: ParsedPool, owner: PoolClaimOwner, nodes: ReadonlyMap<string, string>) {
    const name = pool.pool.name;
    const taken = new Set([...(await this.#o.pools.claims(name)).map((c) => c.ip), ...nodes.keys()]);
    const free = [...poolAddresses(pool)].map((v) => formatIp(pool.family, v)).filter((ip) => !taken.has(ip));
    // Start at a random free address: racing nodes then rarely contend for the same key.
    const start = Math.floor(Math.random() * free.length);
    for (let i = 0; i < free.length; i++) {
      const ip = free[(start + i) % free.length] as string;
      const claim = await this.#claimOne(name, ip, owner);
      if (claim) return claim;
    }
    throw new IpamExhaustedError(
      `pool ${name} exhausted: all ${pool.size} addresses (${pool.pool.ranges.join(', ')}) are in use`,
    );
  }

  /** Releases the attachment's pool address, cluster claim first; [] when it holds none. */
  async release(att: AttachmentKey): Promise<Allocation[]> {
    return this.#mutex.run(attachmentKey(att), async () => {
      const held = this.#held.get(attachmentKey(att));
      if (!held) return [];
      const claim = await this.#o.pools.claimOf(held.pool, held.ip);
      if (
        claim &&
        claim.owner.node === this.#o.node &&
        claim.owner.containerId === att.containerId &&
        claim.owner.ifname === att.ifname
      ) {
        await this.#o.pools.release(held.pool, claim);
      }
      await this.#o.local.release(held.rangeId, held.ip, att);
      this.#held.delete(attachmentKey(att));
      return [toAllocation(held)];
    });
  }

  lookup(att: AttachmentKey): Allocation[] {
    const held = this.#held.get(attachmentKey(att));
    return held ? [toAllocation(held)] : [];
  }

  owned(att: AttachmentKey): OwnedAllocation[] {
    const held = this.#held.get(attachmentKey(att));
    return held ? [{ ...toAllocation(held), ...held.rec }] : [];
  }

  /** Records `network` in the attachment's local record when it names none; whether it did. */
  async adoptNetwork(att: AttachmentKey, network: string): Promise<boolean> {
    return this.#mutex.run(attachmentKey(att), async () => {
      const held = this.#held.get(attachmentKey(att));
      if (!held || held.rec.network !== undefined) return false;
      if (!(await this.#o.local.adoptNetwork(held.rangeId, held.ip, att, network))) return false;
      held.rec = { ...held.rec, network };
      return true;
    });
  }

  list(): OwnedAllocation[] {
    return [...this.#held.values()].map((h) => ({ ...toAllocation(h), ...h.rec }));
  }

  /** Local records of pool addresses that could not be read at open: taken, owner unknown. */
  unreadable(): UnreadableAllocation[] {
    return [...this.#unreadable];
  }

  /** Per pool this node holds addresses of: how many (the pool's size is the store's business). */
  usage(): RangeUsage[] {
    const used = new Map<string, number>();
    for (const h of this.#held.values()) used.set(h.rangeId, (used.get(h.rangeId) ?? 0) + 1);
    const unreadable = new Map<string, number>();
    for (const u of this.#unreadable) unreadable.set(u.rangeId, (unreadable.get(u.rangeId) ?? 0) + 1);
    for (const [rangeId, n] of unreadable) used.set(rangeId, (used.get(rangeId) ?? 0) + n);
    return [...used].map(([rangeId, n]) => ({
      rangeId,
      size: 0n,
      used: n,
      unreadable: unreadable.get(rangeId) ?? 0,
    }));
  }

  /** Every pool address held anywhere in the cluster, with its pool (for the neighbour audit). */
  async clusterClaims(): Promise<Array<{ pool: string; ip: string; owner: PoolClaimOwner }>> {
    const out: Array<{ pool: string; ip: string; owner: PoolClaimOwner }> = [];
    for (const pool of await this.#o.pools.listPools())
      for (const c of await this.#o.pools.claims(pool.name))
        out.push({ pool: pool.name, ip: c.ip, owner: c.owner });
    return out;
  }

  /**
   * At start: cluster claims this node owns without a local record (a crash between the two writes of
   * an ADD) are released; local records the cluster lost are claimed again. Returns what it did.
   */
  async syncWithStore(): Promise<{ released: string[]; reclaimed: string[]; conflicts: string[] }> {
    const out = { released: [] as string[], reclaimed: [] as string[], conflicts: [] as string[] };
    const mine = new Map([...this.#held.values()].map((h) => [`${h.pool} ${h.ip}`, h]));
    const unreadable = new Set(this.#unreadable.map((u) => `${parseRangeId(u.rangeId)?.pool} ${u.ip}`));
    const seen = new Set<string>();
    for (const pool of await this.#o.pools.listPools()) {
      for (const c of await this.#o.pools.claims(pool.name)) {
        if (c.owner.node !== this.#o.node) continue;
        if (unreadable.has(`${pool.name} ${c.ip}`)) continue; // its local record is unreadable: may be in use
        const h = mine.get(`${pool.name} ${c.ip}`);
        if (h && h.rec.containerId === c.owner.containerId && h.rec.ifname === c.owner.ifname) {
          seen.add(`${pool.name} ${c.ip}`);
          continue;
        }
        if (await this.#o.pools.release(pool.name, c)) out.released.push(`${pool.name}/${c.ip}`);
      }
    }
    for (const [key, h] of mine) {
      if (seen.has(key)) continue;
      const owner: PoolClaimOwner = {
        node: this.#o.node,
        containerId: h.rec.containerId,
        ifname: h.rec.ifname,
        createdAt: h.rec.createdAt,
      };
      if (h.rec.pod !== undefined) owner.pod = h.rec.pod;
      if (await this.#o.pools.claim(h.pool, h.ip, owner)) out.reclaimed.push(`${h.pool}/${h.ip}`);
      else out.conflicts.push(`${h.pool}/${h.ip}`);
    }
    return out;
  }
}

function toAllocation(h: Held): Allocation {
  const family = parseIp(h.ip)?.family ?? 4;
  return { ip: h.ip, prefixLength: h.prefixLength, gateway: h.gateway, family, rangeId: h.rangeId };
}
