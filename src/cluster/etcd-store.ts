/**
 * The cluster store in etcd v3, spoken through etcd's JSON gateway over HTTP (etcd-gateway.ts) rather
 * than gRPC: no dependency (the `etcd3` package pulls in grpc-js, protobufjs and a dozen more), every
 * call is one request with its own timeout, and the watch is one streaming POST whose reconnect and
 * resume logic is ours and tested (etcd-watch.ts). Keys: etcd-kv.ts; leases: etcd-lease.ts.
 *
 * Health: a monitor probes etcd every `healthIntervalMs` while it answers and with exponential
 * backoff (capped at `maxBackoffMs`) while it does not; every call's outcome also counts. While etcd
 * is down, calls still try (so recovery is seen at once) but fail within `requestTimeoutMs` per
 * endpoint with ERR_STORE: connection refused fails at once, a hung etcd at the timeout.
 */
import { InvalidConfigError, PodwireError } from '../base/errors.js';
import { Backoff, pause } from './backoff.js';
import { GatewayError } from './etcd-answer.js';
import { type ConnectFn, type EtcdAuth, EtcdGateway } from './etcd-gateway.js';
import { EtcdKeys, EtcdKv, type Kv } from './etcd-kv.js';
import { leasePodCIDRs, releasePodCIDRs } from './etcd-lease.js';
import { EtcdPoolStore } from './etcd-pools.js';
import type { EtcdTls } from './etcd-tls.js';
import { watchNodes } from './etcd-watch.js';
import { HealthState } from './health.js';
import { byName, checkNodeName, parseNodeRecord } from './node-record.js';
import { parsePool } from './pool.js';
import {
  type ClusterStore,
  type NodeEvent,
  type NodeList,
  type NodeRecord,
  type OpOptions,
  type PodCIDRPool,
  type Precondition,
  type PutResult,
  type StoredNode,
  type StoreHealth,
  storeError,
  type WatchOptions,
} from './store.js';

export interface EtcdStoreOptions {
  /** Client URLs, e.g. ["https://10.0.0.1:2379"]; calls start at the last one that answered (failover: etcd-gateway.ts). */
  endpoints: string[];
  /** CA, client certificate and key (PEM text) for https endpoints. */
  tls?: EtcdTls;
  /** etcd user and password (requests carry the token etcd issues for them). */
  auth?: EtcdAuth;
  /**
   * Reads `tls` and `auth` afresh (their files, rotated by the operator); called before every
   * health probe, and what it returns is used from then on. A failure keeps the current ones.
   */
  reloadSecrets?: () => Promise<{ tls?: EtcdTls; auth?: EtcdAuth }>;
  /** Key prefix, default "/podwire". */
  prefix?: string;
  /** Bound on one call to one endpoint; default 2000 ms. */
  requestTimeoutMs?: number;
  /** Probe interval while healthy; default 5000 ms. */
  healthIntervalMs?: number;
  /** First retry delay while unreachable; default 100 ms, doubling up to `maxBackoffMs` (default 5000). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Opens TCP connections (default: net.createConnection); a seam for tests in network namespaces. */
  connect?: ConnectFn;
  /** Hears about records that fail validation (they are skipped); default: process.emitWarning. */
  onInvalidRecord?: (key: string, err: PodwireError) => void;
}

const PREFIX = /^(\/[A-Za-z0-9_.-]+)+$/;
const REVISION = /^[0-9]{1,19}$/;

export class EtcdStore implements ClusterStore {
  readonly description: string;
  readonly writable = true;
  readonly #gateway: EtcdGateway;
  readonly #kv: EtcdKv;
  readonly #keys: EtcdKeys;
  readonly #health = new HealthState(false, 'not contacted yet');
  /** Aborted exactly when the store is closed. */
  readonly #closed = new AbortController();
  readonly #backoff: { initialMs: number; maxMs: number };
  readonly #healthIntervalMs: number;
  readonly #onInvalid: (key: string, err: PodwireError) => void;
  readonly #reloadSecrets: EtcdStoreOptions['reloadSecrets'];
  /** IP pools and their claims, in the same etcd under the same prefix. */
  readonly pools: EtcdPoolStore;
  #monitor: Promise<void> | undefined;

  private constructor(opts: EtcdStoreOptions) {
    const prefix = opts.prefix ?? '/podwire';
    if (!PREFIX.test(prefix)) {
      throw new InvalidConfigError(`cluster.prefix: ${JSON.stringify(prefix)} must look like /podwire`);
    }
    this.#gateway = new EtcdGateway({
      endpoints: opts.endpoints,
      requestTimeoutMs: opts.requestTimeoutMs ?? 2000,
      ...(opts.connect ? { connect: opts.connect } : {}),
      ...(opts.tls ? { tls: opts.tls } : {}),
      ...(opts.auth ? { auth: opts.auth } : {}),
    });
    this.#kv = new EtcdKv(this.#gateway);
    this.#keys = new EtcdKeys(prefix);
    this.#backoff = { initialMs: opts.initialBackoffMs ?? 100, maxMs: opts.maxBackoffMs ?? 5000 };
    this.#healthIntervalMs = opts.healthIntervalMs ?? 5000;
    this.#reloadSecrets = opts.reloadSecrets;
    this.#onInvalid = opts.onInvalidRecord ?? ((key, err) => process.emitWarning(`${key}: ${err.message}`));
    this.description = `etcd ${this.#gateway.endpoints.join(',')} (prefix ${prefix})`;
    this.pools = new EtcdPoolStore(this.#kv, prefix, this.description, (what, fn) => this.#op(what, fn));
  }

  /**
   * Validates the options (ERR_INVALID_CONFIG naming the key), probes etcd once and starts the health
   * monitor. An unreachable etcd does not fail the open: it shows in `health()`, and the store serves
   * once etcd answers. An etcd that answers but rejects us, or that we reject (its certificate fails
   * verification, it refuses the client certificate or the credentials), fails the open with
   * ERR_STORE saying why: that is a configuration to fix, and waiting would not fix it. The same
   * rejection seen later (etcd down at open, a certificate rotated) marks the store unhealthy.
   */
  static async open(opts: EtcdStoreOptions): Promise<EtcdStore> {
    const store = new EtcdStore(opts);
    const failure = await store.#probe();
    if (failure instanceof GatewayError && failure.rejected) {
      await store.close();
      throw storeError(`${store.description}: ${failure.message}`, failure);
    }
    store.#monitor = store.#monitorLoop();
    return store;
  }

  getNode(name: string, opts: OpOptions = {}): Promise<StoredNode | undefined> {
    return this.#op('getNode', async () => {
      const key = this.#keys.node(checkNodeName(name, `${this.description}: getNode`));
      const kv = (await this.#kv.range(key, opts)).kvs[0];
      return kv === undefined ? undefined : this.#stored(kv);
    });
  }

  listNodes(opts: OpOptions = {}): Promise<NodeList> {
    return this.#op('listNodes', async () => {
      // In pages, each decoded to records as it comes: the raw answer for thousands of nodes is
      // never held whole (decision 23).
      let nodes: StoredNode[] = [];
      const { revision } = await this.#kv.rangePages(this.#keys.nodes, {
        ...(opts.signal ? { signal: opts.signal } : {}),
        onPage: (kvs) => {
          for (const kv of kvs) {
            const s = this.#stored(kv);
            if (s !== undefined) nodes.push(s);
          }
        },
        onRestart: () => {
          nodes = [];
        },
      });
      return { revision, nodes: nodes.sort(byName) };
    });
  }

  putNode(node: NodeRecord, precondition: Precondition, opts: OpOptions = {}): Promise<PutResult> {
    return this.#op('putNode', async () => {
      const where = `${this.description}: putNode`;
      const record = parseNodeRecord(node, `${where} ${node?.name}`, { strictKeys: true });
      const key = this.#keys.node(record.name);
      const compare =
        precondition === 'absent'
          ? { key, createRevision: '0' }
          : { key, modRevision: checkVersion(precondition?.version, where) };
      const res = await this.#kv.txn(
        {
          compare: [compare],
          success: [{ put: key, value: JSON.stringify(record) }],
          failure: [{ range: key }],
        },
        opts.signal,
      );
      if (res.succeeded) return { ok: true, version: res.revision };
      const kv = res.ranges[0]?.[0];
      return { ok: false, current: kv === undefined ? undefined : this.#stored(kv) };
    });
  }

  deleteNode(name: string, opts: OpOptions & { ifVersion?: string } = {}): Promise<boolean> {
    return this.#op('deleteNode', async () => {
      const where = `${this.description}: deleteNode`;
      const key = this.#keys.node(checkNodeName(name, where));
      const compare =
        opts.ifVersion === undefined ? [] : [{ key, modRevision: checkVersion(opts.ifVersion, where) }];
      const res = await this.#kv.txn({ compare, success: [{ range: key }, { delete: key }] }, opts.signal);
      return res.succeeded && (res.ranges[0]?.length ?? 0) > 0;
    });
  }

  async leasePodCIDRs(nodeName: string, pool: PodCIDRPool, opts: OpOptions = {}): Promise<string[]> {
    this.#checkOpen('leasePodCIDRs');
    const parsed = parsePool(pool?.clusterCIDRs, pool?.nodeCIDRMaskSize);
    return this.#op('leasePodCIDRs', () => {
      const where = `${this.description}: leasePodCIDRs`;
      const name = checkNodeName(nodeName, where);
      return leasePodCIDRs({ kv: this.#kv, keys: this.#keys, where, signal: opts.signal }, name, parsed);
    });
  }

  releasePodCIDRs(nodeName: string, opts: OpOptions = {}): Promise<string[]> {
    return this.#op('releasePodCIDRs', () => {
      const where = `${this.description}: releasePodCIDRs`;
      const name = checkNodeName(nodeName, where);
      return releasePodCIDRs({ kv: this.#kv, keys: this.#keys, where, signal: opts.signal }, name);
    });
  }

  watchNodes(opts: WatchOptions): AsyncGenerator<NodeEvent, void, undefined> {
    this.#checkOpen('watchNodes');
    return watchNodes(
      {
        gateway: this.#gateway,
        keys: this.#keys,
        health: this.#health,
        closed: this.#closed.signal,
        backoff: () => new Backoff(this.#backoff),
        list: (signal) => this.listNodes({ signal }),
        decode: (kv) => this.#stored(kv)?.node,
        where: this.description,
      },
      opts,
    );
  }

  health(): StoreHealth {
    return this.#health.snapshot();
  }

  /** Ends the monitor, every watch and every call in flight. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed.signal.aborted) return;
    this.#closed.abort(storeError(`${this.description}: closed`));
    this.#gateway.destroy();
    await this.#monitor;
  }

  #checkOpen(op: string): void {
    if (this.#closed.signal.aborted) throw storeError(`${this.description}: ${op}: store is closed`);
  }

  /** Runs one operation: refuses it after close, names it in errors, and feeds the health view. */
  async #op<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.#checkOpen(what);
    try {
      const result = await fn();
      this.#health.markOk();
      return result;
    } catch (err) {
      if (this.#closed.signal.aborted) throw storeError(`${this.description}: ${what}: store is closed`, err);
      if (!(err instanceof GatewayError)) throw err;
      if (err.unreachable || err.rejected) this.#health.markDown(err.message);
      throw storeError(`${this.description}: ${what}: ${err.message}`, err);
    }
  }

  /** Decodes a node key; an invalid value is reported and treated as absent. */
  #stored(kv: Kv): StoredNode | undefined {
    const name = kv.key.slice(this.#keys.nodes.length);
    try {
      const value: unknown = JSON.parse(kv.value);
      const node = parseNodeRecord(value, kv.key, { strictKeys: false });
      if (node.name !== name) throw storeError(`${kv.key}: record names node ${node.name}`);
      return { node, version: kv.modRevision };
    } catch (err) {
      const e = err instanceof PodwireError ? err : storeError(`${kv.key}: not JSON`, err);
      this.#onInvalid(kv.key, e);
      return undefined;
    }
  }

  /** Picks up rotated certificates and credentials; unreadable or unusable ones are reported and skipped. */
  async #reload(): Promise<void> {
    if (this.#reloadSecrets === undefined) return;
    try {
      this.#gateway.setSecrets(await this.#reloadSecrets());
    } catch (err) {
      // A Secret being swapped can be half-visible for a moment; the next round reads it again.
      const e = err instanceof PodwireError ? err : storeError('reloading the TLS files', err);
      this.#onInvalid('cluster.tls/cluster.auth', e);
    }
  }

  /** Undefined when etcd answered; else the failure (health marked down). */
  async #probe(): Promise<unknown> {
    try {
      await this.#kv.range(this.#keys.probe, { signal: this.#closed.signal });
      this.#health.markOk();
      return undefined;
    } catch (err) {
      if (!this.#closed.signal.aborted) {
        this.#health.markDown(err instanceof Error ? err.message : String(err));
      }
      return err ?? new Error('probe failed');
    }
  }

  async #monitorLoop(): Promise<void> {
    const backoff = new Backoff(this.#backoff);
    let ok = this.#health.ok;
    while (!this.#closed.signal.aborted) {
      // Any health flip (a call failing, a watch breaking) cuts the wait short and re-probes.
      await pause(ok ? this.#healthIntervalMs : backoff.next(), this.#closed.signal, this.#health);
      if (this.#closed.signal.aborted) return;
      await this.#reload();
      ok = (await this.#probe()) === undefined;
      if (ok) backoff.reset();
    }
  }
}

function checkVersion(version: unknown, where: string): string {
  if (typeof version !== 'string' || !REVISION.test(version)) {
    throw storeError(`${where}: version ${JSON.stringify(version)} is not one this store issued`);
  }
  return version;
}
