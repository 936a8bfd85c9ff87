/**
 * The cluster store seam: where cluster-wide state lives (the nodes, their underlay addresses and
 * their pod CIDRs). Implementations: `FileStore` (a static file), `EtcdStore` (etcd v3); Kubernetes
 * (Node objects, resourceVersion, watch) is the one to come, and the shape follows it:
 *
 * - every stored record carries an opaque `version` (etcd: mod_revision; Kubernetes: resourceVersion)
 *   and writes are compare-and-swap on it ("absent" = create only);
 * - a list carries the store's `revision`, and a watch resumes from one; when the store no longer
 *   has the history (etcd compaction, HTTP 410 Gone) the watch lists afresh and emits the difference,
 *   so a consumer sees one gap-free stream of events whatever happened to the connection.
 *
 * Versions and revisions are opaque text: compare them for equality only.
 *
 * Errors: every failure is a `PodwireError` with code ERR_STORE and a message naming what failed,
 * except a bad pod CIDR pool, which is a configuration error (ERR_INVALID_CONFIG, naming the key).
 * `storeFailure` tells a failure for want of an answer from an answer that refuses.
 */
import { type PodwireError, StoreError } from '../base/errors.js';
import type { PodCache } from './kube-pod-cache.js';
import type { PolicyCache } from './kube-policy-cache.js';
import type { PoolStore } from './pool-store.js';

/** One node of the cluster. Optional fields may be added; readers ignore fields they do not know. */
export interface NodeRecord {
  /** The node's name (a DNS-1123 subdomain, as Kubernetes node names are). */
  name: string;
  /** The node's address on the underlay network (IPv4 or IPv6 text, canonical). */
  underlayIP: string;
  /** The node's pod CIDRs, at most one per family, canonical text. */
  podCIDRs: string[];
  /** The MAC address of the node's VXLAN device, lower case, when the datapath publishes one. */
  vtepMac?: string;
  /**
   * The MAC the node's underlay IP answers with (its uplink's, which stays the node's MAC when the
   * uplink joins the pod bridge): what the neighbour audit expects for `underlayIP`.
   */
  uplinkMac?: string;
  labels?: Record<string, string>;
}

/** A record as the store holds it. */
export interface StoredNode {
  node: NodeRecord;
  /** Opaque; changes on every write of this record. */
  version: string;
}

export interface NodeList {
  /** The store revision the list reflects; a watch from it misses nothing after it. */
  revision: string;
  /** Sorted by name. */
  nodes: StoredNode[];
}

/**
 * A change to the set of nodes. `revision` is the store revision of the change; a `delete` carries
 * the last record the watcher knew. Events for one node arrive in order.
 */
export type NodeEvent =
  | { type: 'put'; node: NodeRecord; version: string; revision: string }
  | { type: 'delete'; node: NodeRecord; revision: string };

/** Compare-and-swap condition of a write: the version the writer last read, or "must not exist". */
export type Precondition = { version: string } | 'absent';

export type PutResult =
  | { ok: true; version: string }
  /** The precondition did not hold; `current` is what the store holds now (undefined: absent). */
  | { ok: false; current: StoredNode | undefined };

/** Where node pod CIDRs are carved from. Build it with `parsePodCIDRPool` (src/cluster/pool.ts). */
export interface PodCIDRPool {
  clusterCIDRs: string[];
  /** Prefix length of one node's CIDR, for each family present in `clusterCIDRs`. */
  nodeCIDRMaskSize: { ipv4?: number; ipv6?: number };
}

export interface StoreHealth {
  ok: boolean;
  /** Why the store is unhealthy; absent when ok. */
  error?: string;
  /** When `ok` last changed (or the store was opened). */
  since: Date;
}

export interface OpOptions {
  signal?: AbortSignal;
}

export interface WatchOptions {
  /** Ends the watch: the iterator returns. */
  signal: AbortSignal;
  /**
   * A list the caller already holds: the watch starts after `since.revision` and, should that history
   * be gone, emits the difference from `since.nodes`. Without it the watch lists first and emits a
   * `put` for every node that exists (list-then-watch, like a Kubernetes informer).
   */
  since?: NodeList;
}

export interface ClusterStore {
  /** e.g. "etcd http://10.0.0.1:2379 (prefix /podwire)", for logs and `podwire status`. */
  readonly description: string;
  /** false for a store whose node records come from configuration (the file store). */
  readonly writable: boolean;

  getNode(name: string, opts?: OpOptions): Promise<StoredNode | undefined>;
  listNodes(opts?: OpOptions): Promise<NodeList>;
  /** Writes the record if `precondition` holds. The record is validated first (ERR_STORE naming the field). */
  putNode(node: NodeRecord, precondition: Precondition, opts?: OpOptions): Promise<PutResult>;
  /** Deletes the record (only at `ifVersion` when given). Returns whether a record was deleted. */
  deleteNode(name: string, opts?: OpOptions & { ifVersion?: string }): Promise<boolean>;
  /**
   * Survives reconnects: resumes from the last revision it delivered and never loses an event. It
   * yields until `opts.signal` aborts or the store closes; connection trouble shows in `health()`.
   */
  watchNodes(opts: WatchOptions): AsyncIterable<NodeEvent>;

  /**
   * The node's pod CIDRs: one per family present in `pool.clusterCIDRs`, in the order the families
   * first appear there. The same node gets the same CIDRs every time until `releasePodCIDRs`; no two
   * nodes ever hold overlapping CIDRs, whatever the timing.
   */
  leasePodCIDRs(nodeName: string, pool: PodCIDRPool, opts?: OpOptions): Promise<string[]>;
  /** Frees the node's CIDRs (explicit node removal only). Returns the CIDRs released. */
  releasePodCIDRs(nodeName: string, opts?: OpOptions): Promise<string[]>;

  /** IP pools and their cluster-wide claims; undefined for a store without transactions (the file). */
  readonly pools?: PoolStore;

  /** Pods and namespaces of the cluster (store kubernetes only), for NetworkPolicy. */
  readonly podCache?: PodCache;
  /** NetworkPolicies of the cluster (store kubernetes only); its health is not the store's. */
  readonly policyCache?: PolicyCache;

  /** Records the store holds that are not valid (skipped, each version counted once); where the store counts them. */
  readonly invalidRecords?: number;

  /** A snapshot of the store's reachability. */
  health(): StoreHealth;
  /** Idempotent. Ends every watch; later calls fail with ERR_STORE "... is closed". */
  close(): Promise<void>;
}

export function storeError(message: string, cause?: unknown): PodwireError {
  return new StoreError(message, cause === undefined ? undefined : { cause });
}

/**
 * What a failed store call says about the request:
 * - `unreachable`: nothing, for want of an answer (connection refused, a timeout, a reset, no leader);
 * - `rejected`: nothing either: the store refused this client (its certificate, credentials or
 *   permissions), a configuration to fix;
 * - `failed`: the store's server failed the call with an error of its own (etcd: too many requests,
 *   no space, an invalid request), which says nothing about the records either;
 * - `answered`: the store answered, and what it holds refuses the request (a lease the pool no
 *   longer holds, a CIDR key another node holds, no free CIDR, a node the file does not list).
 * Only `unreachable` leaves an earlier answer standing as the store's word. An implementation marks
 * its transport failures with `unreachable` and `rejected` flags (etcd: `GatewayError`); the marks
 * are looked for along the `cause` chain, since the store wraps them with the operation's name.
 */
export function storeFailure(err: unknown): 'unreachable' | 'rejected' | 'failed' | 'answered' {
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 8; depth++) {
    const mark = e as { unreachable?: unknown; rejected?: unknown };
    if (mark.unreachable === true) return 'unreachable';
    if (mark.rejected === true) return 'rejected';
    if (typeof mark.unreachable === 'boolean') return 'failed';
    e = e.cause;
  }
  return 'answered';
}

/** Rejects with the signal's reason as an ERR_STORE naming the operation, when it has aborted. */
export function throwIfAborted(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted) throw storeError(`${what}: aborted`, signal.reason);
}
