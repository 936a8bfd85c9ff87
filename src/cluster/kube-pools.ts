/**
 * IP pools as podwire's custom resource (`ippools.podwire.io`, deploy/crd-ippool.yaml; decision 48),
 * the pool seam (pool-store.ts) for `cluster: {store: kubernetes, pools: true}`:
 *
 *   apiVersion: podwire.io/v1alpha1
 *   kind: IPPool
 *   metadata: {name: blue, resourceVersion: "812"}
 *   spec: {ranges: [172.30.0.100-172.30.0.199], subnet: {gateway: 172.30.0.254, prefixLength: 24}, vlan: 0}
 *   status:
 *     allocations:
 *       172.30.0.105: {node: n1, containerID: 9f2c..., ifname: eth0, pod: default/web-0,
 *                      createdAt: "2026-...", claim: 5b0e61a2c4d7f803}
 *
 * Every held address and its owner is in the pool object itself, so one pool's claims are one object
 * and one resourceVersion: a claim or a release is a merge patch of `status` carrying the
 * resourceVersion it was decided on. The API server applies it only if the object is still at that
 * version; else 409 Conflict, and the store reads the object again, decides again (the address may
 * have been taken meanwhile) and retries after a jittered pause. Of two nodes deciding on one version,
 * one write lands and the other is re-decided: never one address twice, never a lost claim.
 * `claim` (random per claim) is the claim's version: a release names it, so a stale release never
 * removes a newer claim of the same address.
 *
 * Reads: a reflector on the collection (kube/reflector.ts) is the cache that `getPool` answers from
 * and that a claim or release first decides on; after its own write the store waits until the cache
 * holds the version it wrote, so the next decision starts from it. Answers another node relies on
 * (`claims`, `claimOf`, `listPools`, and a "no such pool" or "taken" seen in the cache) are read
 * fresh from the API server, which costs one GET and never answers from a lagging watch.
 *
 * Every object passes `poolFromObject` (the same parseIpPool as the etcd store's and the CLI's): the
 * schema refuses what it can express; what it cannot (START after END, a range outside the subnet,
 * overlapping ranges, a gateway of the other family) makes the object invalid: logged once
 * (`kube-object-invalid`), counted (`invalidObjects`) and treated as absent; nothing else is touched.
 */
import { randomBytes } from 'node:crypto';
import { InvalidConfigError } from '../base/errors.js';
import { canonicalIp } from '../base/ip.js';
import type { KubeClient } from '../kube/kube-client.js';
import { answerError } from '../kube/kube-error.js';
import { type KubeLog, type ObjectMeta, Reflector } from '../kube/reflector.js';
import { Backoff, pause } from './backoff.js';
import { type IpPool, parseIpPool } from './ip-pool.js';
import type { PoolClaim, PoolClaimOwner, PoolStore } from './pool-store.js';
import { type OpOptions, storeError, throwIfAborted } from './store.js';

/** For pauses of calls without a signal. */
const NEVER = new AbortController().signal;

export const IPPOOL_API_VERSION = 'podwire.io/v1alpha1';
export const IPPOOLS_PATH = '/apis/podwire.io/v1alpha1/ippools';

/** One held address, as the pool object's status.allocations holds it. */
interface WireAllocation {
  node: string;
  containerID: string;
  ifname: string;
  pod?: string;
  createdAt: string;
  claim: string;
}

interface Held {
  owner: PoolClaimOwner;
  version: string;
}

/** A pool object, decoded: the pool and its held addresses (canonical text). */
export interface PoolObject {
  pool: IpPool;
  allocations: ReadonlyMap<string, Held>;
}

interface Versioned {
  object: PoolObject;
  resourceVersion: string;
}

const ALLOCATION_STRINGS = ['node', 'containerID', 'ifname', 'createdAt', 'claim'] as const;

/** An IPPool object as a pool; throws ERR_STORE naming the field when it is not a valid one. */
export function poolFromObject(object: unknown, meta: ObjectMeta): PoolObject {
  const where = `IPPool ${meta.name}`;
  const o = object as { spec?: Record<string, unknown>; status?: { allocations?: unknown } } | null;
  const spec = o?.spec;
  if (spec === null || typeof spec !== 'object') throw storeError(`${where}: no spec`);
  let pool: IpPool;
  try {
    pool = parseIpPool(
      { name: meta.name, ranges: spec.ranges, subnet: spec.subnet, vlan: spec.vlan ?? 0 },
      where,
    ).pool;
  } catch (err) {
    throw storeError((err as Error).message, err);
  }
  const raw = o?.status?.allocations ?? {};
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw storeError(`${where}: status.allocations must be a mapping`);
  const allocations = new Map<string, Held>();
  for (const [ip, value] of Object.entries(raw as Record<string, unknown>)) {
    const key = `${where}: status.allocations[${JSON.stringify(ip)}]`;
    let canonical: string;
    try {
      canonical = canonicalIp(ip, 'address');
    } catch {
      throw storeError(`${key}: not an IP address`);
    }
    if (canonical !== ip) throw storeError(`${key}: not in canonical form (${canonical})`);
    const a = value as Partial<Record<keyof WireAllocation, unknown>> | null;
    if (a === null || typeof a !== 'object') throw storeError(`${key}: must be a mapping`);
    for (const f of ALLOCATION_STRINGS)
      if (typeof a[f] !== 'string' || a[f] === '') throw storeError(`${key}.${f}: must be a string`);
    if (a.pod !== undefined && typeof a.pod !== 'string') throw storeError(`${key}.pod: must be a string`);
    const owner: PoolClaimOwner = {
      node: a.node as string,
      containerId: a.containerID as string,
      ifname: a.ifname as string,
      createdAt: a.createdAt as string,
    };
    if (typeof a.pod === 'string') owner.pod = a.pod;
    allocations.set(canonical, { owner, version: a.claim as string });
  }
  return { pool, allocations };
}

function wireAllocation(owner: PoolClaimOwner, claim: string): WireAllocation {
  const out: WireAllocation = {
    node: owner.node,
    containerID: owner.containerId,
    ifname: owner.ifname,
    createdAt: owner.createdAt,
    claim,
  };
  if (owner.pod !== undefined) out.pod = owner.pod;
  return out;
}

function copyPool(p: IpPool): IpPool {
  return { ...p, ranges: [...p.ranges], subnet: { ...p.subnet } };
}

function claimOf(ip: string, held: Held): PoolClaim {
  return { ip, owner: { ...held.owner }, version: held.version };
}

export interface KubePoolStoreOptions {
  client: KubeClient;
  /** The store's description, for errors. */
  where: string;
  log: KubeLog;
  /** The pause between a conflict and the next try: doubling from initialMs to maxMs, jittered. */
  conflictBackoff?: { initialMs: number; maxMs: number };
  /** Tries of one write before it fails with ERR_STORE (the CNI call fails; nothing is half-done). */
  maxAttempts?: number;
  /** How long a write waits for the watch to deliver it before going on; default 5 s. */
  cacheWaitMs?: number;
}

export interface KubePoolStats {
  /** Writes the API server refused with 409 Conflict (the object had moved on), each re-decided. */
  conflicts: number;
  /** Writes that landed (create, claim, release, delete). */
  writes: number;
  /** Own writes the watch had not delivered within cacheWaitMs. */
  cacheLag: number;
}

export class KubePoolStore implements PoolStore {
  readonly stats: KubePoolStats = { conflicts: 0, writes: 0, cacheLag: 0 };
  readonly #o: KubePoolStoreOptions;
  readonly #reflector: Reflector<PoolObject>;
  /** Per pool, the tail of this client's writes: one at a time, so they never conflict with each other. */
  readonly #tails = new Map<string, Promise<void>>();
  readonly #waiters = new Map<string, Set<() => void>>();

  constructor(o: KubePoolStoreOptions) {
    this.#o = o;
    this.#reflector = new Reflector<PoolObject>({
      client: o.client,
      path: IPPOOLS_PATH,
      decode: poolFromObject,
      log: o.log,
    });
    this.#reflector.subscribe((e) => {
      for (const wake of this.#waiters.get(e.key) ?? []) wake();
    });
  }

  start(): void {
    this.#reflector.start();
  }

  async stop(): Promise<void> {
    await this.#reflector.stop();
  }

  /** Pool objects skipped as invalid so far (each version once). */
  get invalidObjects(): number {
    return this.#reflector.stats.invalidObjects;
  }

  health(): ReturnType<Reflector<PoolObject>['health']> {
    return this.#reflector.health();
  }

  #path(name: string, sub = ''): string {
    return `${IPPOOLS_PATH}/${encodeURIComponent(name)}${sub}`;
  }

  /** The pool object now, read from the API server (a consistent read); undefined when there is none. */
  async #read(name: string, opts: OpOptions): Promise<Versioned | undefined> {
    const r = await this.#o.client.request(
      'GET',
      this.#path(name),
      opts.signal ? { signal: opts.signal } : {},
    );
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw answerError(`${this.#o.where}: GET IPPool ${name}`, r.status, r.body);
    const object = JSON.parse(r.body) as { metadata: { resourceVersion: string } };
    const resourceVersion = object.metadata.resourceVersion;
    return { object: poolFromObject(object, { name, resourceVersion }), resourceVersion };
  }

  /** The cached pool object, if the cache has it. */
  #cached(name: string): Versioned | undefined {
    const object = this.#reflector.get(name);
    const resourceVersion = this.#reflector.versionOf(name);
    return object === undefined || resourceVersion === undefined ? undefined : { object, resourceVersion };
  }

  /** Resolves once the cache holds `name` at `resourceVersion` (or without it, for undefined), or after cacheWaitMs. */
  #caught(name: string, resourceVersion: string | undefined): Promise<void> {
    const there = (): boolean =>
      resourceVersion === undefined
        ? this.#reflector.get(name) === undefined
        : this.#reflector.versionOf(name) === resourceVersion;
    if (there()) return Promise.resolve();
    return new Promise((resolve) => {
      let set = this.#waiters.get(name);
      if (set === undefined) {
        set = new Set();
        this.#waiters.set(name, set);
      }
      const done = (): void => {
        clearTimeout(timer);
        set.delete(wake);
        if (set.size === 0 && this.#waiters.get(name) === set) this.#waiters.delete(name);
        resolve();
      };
      const wake = (): void => {
        if (there()) done();
      };
      const timer = setTimeout(() => {
        this.stats.cacheLag++;
        done();
      }, this.#o.cacheWaitMs ?? 5000);
      timer.unref();
      set.add(wake);
    });
  }

  /** Runs `fn` after this client's earlier writes to the same pool. */
  async #serial<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(name) ?? Promise.resolve();
    let done!: () => void;
    const tail = new Promise<void>((resolve) => {
      done = resolve;
    });
    this.#tails.set(name, tail);
    try {
      await previous;
      return await fn();
    } finally {
      done();
      if (this.#tails.get(name) === tail) this.#tails.delete(name);
    }
  }

  /**
   * The compare-and-swap loop of one pool object: `decide` looks at the object (from the cache first,
   * then as read after each conflict) and says what to patch, or what to answer without writing.
   * A decision that says "no" on the cache's word is taken again on a fresh read.
   */
  #update<T>(
    name: string,
    what: string,
    opts: OpOptions,
    decide: (
      current: Versioned | undefined,
    ) => { answer: T } | { patch: Record<string, unknown>; done: (rv: string) => T },
  ): Promise<T> {
    return this.#serial(name, async () => {
      const backoff = new Backoff(this.#o.conflictBackoff ?? { initialMs: 2, maxMs: 200 });
      const attempts = this.#o.maxAttempts ?? 200;
      let current = this.#cached(name);
      let fresh = current === undefined;
      if (fresh) current = await this.#read(name, opts);
      for (let attempt = 1; ; attempt++) {
        throwIfAborted(opts.signal, `${this.#o.where}: ${what}`);
        const decision = decide(current);
        if ('answer' in decision) {
          if (fresh) return decision.answer;
          current = await this.#read(name, opts);
          fresh = true;
          continue;
        }
        const rv = (current as Versioned).resourceVersion;
        // The whole point: the API server applies this only while the object is at `rv`.
        const body = { metadata: { resourceVersion: rv }, status: decision.patch };
        const r = await this.#o.client.request('PATCH', this.#path(name, '/status'), {
          body,
          contentType: 'application/merge-patch+json',
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
        if (r.status === 200) {
          this.stats.writes++;
          const written = (JSON.parse(r.body) as { metadata: { resourceVersion: string } }).metadata
            .resourceVersion;
          await this.#caught(name, written);
          return decision.done(written);
        }
        if (r.status === 409) {
          this.stats.conflicts++;
          if (attempt >= attempts)
            throw storeError(`${this.#o.where}: ${what}: ${attempt} conflicts in a row on IPPool ${name}`);
          await pause(backoff.next(), opts.signal ?? NEVER);
          current = await this.#read(name, opts);
          fresh = true;
          continue;
        }
        if (r.status === 404) {
          current = undefined;
          fresh = true;
          continue;
        }
        throw answerError(`${this.#o.where}: ${what}: PATCH IPPool ${name}`, r.status, r.body);
      }
    });
  }

  async createPool(pool: IpPool, opts: OpOptions = {}): Promise<boolean> {
    const p = parseIpPool(pool, `${this.#o.where}: createPool`).pool;
    throwIfAborted(opts.signal, `${this.#o.where}: createPool`);
    const object = {
      apiVersion: IPPOOL_API_VERSION,
      kind: 'IPPool',
      metadata: { name: p.name },
      spec: { ranges: p.ranges, subnet: p.subnet, vlan: p.vlan },
    };
    const r = await this.#o.client.request('POST', IPPOOLS_PATH, {
      body: object,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    if (r.status === 409) return false;
    if (r.status === 422)
      throw new InvalidConfigError(
        `${this.#o.where}: createPool ${p.name}: ${answerError('the API server refused it', r.status, r.body).message}`,
      );
    if (r.status !== 201 && r.status !== 200)
      throw answerError(`${this.#o.where}: createPool ${p.name}`, r.status, r.body);
    this.stats.writes++;
    await this.#caught(
      p.name,
      (JSON.parse(r.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
    );
    return true;
  }

  async getPool(name: string, opts: OpOptions = {}): Promise<IpPool | undefined> {
    throwIfAborted(opts.signal, `${this.#o.where}: getPool`);
    const cached = this.#reflector.get(name);
    if (cached) return copyPool(cached.pool);
    const read = await this.#read(name, opts);
    return read === undefined ? undefined : copyPool(read.object.pool);
  }

  async listPools(opts: OpOptions = {}): Promise<IpPool[]> {
    throwIfAborted(opts.signal, `${this.#o.where}: listPools`);
    const list = (await this.#o.client.getJson(IPPOOLS_PATH, opts.signal)) as { items?: unknown[] };
    const pools: IpPool[] = [];
    for (const item of list.items ?? []) {
      const meta = (item as { metadata: { name: string; resourceVersion: string } }).metadata;
      try {
        pools.push(poolFromObject(item, meta).pool);
      } catch {
        // an invalid pool is absent; the reflector logs and counts it, once per version
      }
    }
    return pools.sort((a, b) => a.name.localeCompare(b.name));
  }

  async deletePool(name: string, opts: OpOptions = {}): Promise<boolean> {
    const what = `${this.#o.where}: deletePool ${name}`;
    return this.#serial(name, async () => {
      const backoff = new Backoff(this.#o.conflictBackoff ?? { initialMs: 2, maxMs: 200 });
      for (;;) {
        throwIfAborted(opts.signal, what);
        const r = await this.#o.client.request(
          'GET',
          this.#path(name),
          opts.signal ? { signal: opts.signal } : {},
        );
        if (r.status === 404) return false;
        if (r.status !== 200) throw answerError(what, r.status, r.body);
        // not decoded whole: an invalid pool can still be deleted, if nothing in it is held
        const object = JSON.parse(r.body) as {
          metadata: { resourceVersion: string };
          status?: { allocations?: Record<string, Partial<WireAllocation>> };
        };
        const held = Object.entries(object.status?.allocations ?? {});
        if (held.length > 0) {
          const who = held.slice(0, 5).map(([ip, a]) => `${ip} (${a.node} ${a.pod ?? a.containerID})`);
          throw storeError(
            `${what}: ${held.length} address(es) still held: ${who.join(', ')}${held.length > 5 ? ', ...' : ''}`,
          );
        }
        // Deleted only while still at the version read: a claim that landed meanwhile keeps it.
        const d = await this.#o.client.request('DELETE', this.#path(name), {
          body: {
            apiVersion: 'v1',
            kind: 'DeleteOptions',
            preconditions: { resourceVersion: object.metadata.resourceVersion },
          },
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
        if (d.status === 404) return false;
        if (d.status === 409) {
          this.stats.conflicts++;
          await pause(backoff.next(), opts.signal ?? NEVER);
          continue;
        }
        if (d.status !== 200 && d.status !== 202) throw answerError(what, d.status, d.body);
        this.stats.writes++;
        await this.#caught(name, undefined);
        return true;
      }
    });
  }

  claim(
    pool: string,
    ip: string,
    owner: PoolClaimOwner,
    opts: OpOptions = {},
  ): Promise<PoolClaim | undefined> {
    const canonical = canonicalIp(ip, 'pool address');
    const version = randomBytes(8).toString('hex');
    return this.#update<PoolClaim | undefined>(pool, `claim ${canonical}`, opts, (current) => {
      if (current === undefined)
        throw new InvalidConfigError(`${this.#o.where}: no IP pool named ${JSON.stringify(pool)}`);
      if (current.object.allocations.has(canonical)) return { answer: undefined };
      return {
        patch: { allocations: { [canonical]: wireAllocation(owner, version) } },
        done: () => ({ ip: canonical, owner: { ...owner }, version }),
      };
    });
  }

  release(pool: string, claim: PoolClaim, opts: OpOptions = {}): Promise<boolean> {
    return this.#update<boolean>(pool, `release ${claim.ip}`, opts, (current) => {
      const held = current?.object.allocations.get(claim.ip);
      if (held === undefined || held.version !== claim.version) return { answer: false };
      return { patch: { allocations: { [claim.ip]: null } }, done: () => true };
    });
  }

  async claimOf(pool: string, ip: string, opts: OpOptions = {}): Promise<PoolClaim | undefined> {
    const canonical = canonicalIp(ip, 'pool address');
    throwIfAborted(opts.signal, `${this.#o.where}: claimOf`);
    const held = (await this.#read(pool, opts))?.object.allocations.get(canonical);
    return held === undefined ? undefined : claimOf(canonical, held);
  }

  async claims(pool: string, opts: OpOptions = {}): Promise<PoolClaim[]> {
    throwIfAborted(opts.signal, `${this.#o.where}: claims`);
    const read = await this.#read(pool, opts);
    return [...(read?.object.allocations ?? new Map<string, Held>())].map(([ip, h]) => claimOf(ip, h));
  }
}
