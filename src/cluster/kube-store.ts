/**
 * The Kubernetes API as the cluster store (`cluster: {store: kubernetes}`), for nodes: the records
 * are the Node objects, read through one reflector (kube/reflector.ts) whose cache answers
 * `getNode`/`listNodes` and feeds `watchNodes`.
 *
 * A Node as a record:
 * - `podCIDRs`: `spec.podCIDRs` (or the older single `spec.podCIDR`), allocated by the controller
 *   manager; podwire never writes them, so "leasing" is reading them (`leasePodCIDRs` waits until the
 *   Node has them) and releasing is deleting the Node, which is not podwire's to do;
 * - `underlayIP`: the Node's `InternalIP` address of the family the agent published (its uplink's),
 *   or its first InternalIP before the agent has published anything;
 * - `vtepMac`, `uplinkMac` and the agent's underlay address: the annotation `podwire.io/node`
 *   (JSON), which each agent writes on its own Node only (`putNode`, a merge patch carrying the
 *   resourceVersion read, so it is compare-and-swap like the etcd store's writes).
 *
 * Every Node goes through `parseNodeRecord`, as the etcd records do: one whose annotation or CIDRs
 * are malformed is skipped with a log line (`kube-object-invalid`) and counted (`invalidRecords`), and
 * treated as absent; the peer checks (agent/startup/peer-check.ts) then see the records exactly as
 * they see etcd's.
 */
import { normalizeIp } from '../base/ip.js';
import { type ConnectFn, KubeClient } from '../kube/kube-client.js';
import type { KubeConnection } from '../kube/kube-config.js';
import { KubeApiError } from '../kube/kube-error.js';
import { type KubeLog, type ObjectMeta, Reflector } from '../kube/reflector.js';
import { pause } from './backoff.js';
import { EventQueue } from './event-queue.js';
import { PodCache } from './kube-pod-cache.js';
import { PolicyCache } from './kube-policy-cache.js';
import { KubePoolStore } from './kube-pools.js';
import { byName, diffNodes, parseNodeRecord } from './node-record.js';
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
  throwIfAborted,
  type WatchOptions,
} from './store.js';

export const NODE_ANNOTATION = 'podwire.io/node';

export interface KubeStoreOptions {
  connection: KubeConnection;
  /** This agent's Node: the only one `putNode` writes. */
  nodeName: string;
  connect?: ConnectFn;
  log?: KubeLog;
  requestTimeoutMs?: number;
  /** How often `leasePodCIDRs` looks again for CIDRs the Node does not have yet; default 500 ms. */
  leasePollMs?: number;
  /** Offer IP pools: the IPPool custom resource (kube-pools.ts, deploy/crd-ippool.yaml). */
  pools?: boolean;
}

interface WireNode {
  metadata?: { annotations?: Record<string, unknown>; labels?: Record<string, unknown> };
  spec?: { podCIDR?: unknown; podCIDRs?: unknown };
  status?: { addresses?: { type?: unknown; address?: unknown }[] };
}

/** The Node's InternalIP addresses, canonical. */
function internalIPs(node: WireNode): string[] {
  const out: string[] = [];
  for (const a of node.status?.addresses ?? []) {
    if (a?.type !== 'InternalIP' || typeof a.address !== 'string') continue;
    const ip = normalizeIp(a.address);
    if (ip !== undefined) out.push(ip);
  }
  return out;
}

/** A Node object as a node record; throws (ERR_STORE naming the field) when it is not a valid one. */
export function nodeFromObject(object: unknown, meta: ObjectMeta): NodeRecord {
  const node = object as WireNode;
  const where = `Node ${meta.name}`;
  const text = node.metadata?.annotations?.[NODE_ANNOTATION];
  let published: Record<string, unknown> = {};
  if (text !== undefined) {
    try {
      published = JSON.parse(String(text)) as Record<string, unknown>;
    } catch {
      throw storeError(`${where}: annotation ${NODE_ANNOTATION} is not JSON`);
    }
    if (published === null || typeof published !== 'object' || Array.isArray(published)) {
      throw storeError(`${where}: annotation ${NODE_ANNOTATION} must be a JSON object`);
    }
  }
  const addresses = internalIPs(node);
  const wanted = typeof published.underlayIP === 'string' ? normalizeIp(published.underlayIP) : undefined;
  if (published.underlayIP !== undefined && wanted === undefined) {
    throw storeError(`${where}: annotation ${NODE_ANNOTATION}: underlayIP is not an IP address`);
  }
  const family = (ip: string): number => (ip.includes(':') ? 6 : 4);
  const underlayIP =
    wanted === undefined
      ? addresses[0]
      : (addresses.find((a) => a === wanted) ?? addresses.find((a) => family(a) === family(wanted)));
  if (underlayIP === undefined)
    throw storeError(`${where}: no InternalIP address${wanted ? ` of ${wanted}'s family` : ''}`);
  const spec = node.spec ?? {};
  const podCIDRs = Array.isArray(spec.podCIDRs)
    ? spec.podCIDRs
    : typeof spec.podCIDR === 'string'
      ? [spec.podCIDR]
      : [];
  const labels = node.metadata?.labels;
  return parseNodeRecord(
    {
      name: meta.name,
      underlayIP,
      podCIDRs,
      ...(published.vtepMac === undefined ? {} : { vtepMac: published.vtepMac }),
      ...(published.uplinkMac === undefined ? {} : { uplinkMac: published.uplinkMac }),
      ...(labels && typeof labels === 'object' ? { labels } : {}),
    },
    where,
    { strictKeys: false },
  );
}

export class KubeStore implements ClusterStore {
  readonly description: string;
  readonly writable = true;
  readonly #o: KubeStoreOptions;
  readonly #client: KubeClient;
  readonly #nodes: Reflector<NodeRecord>;
  readonly #closed = new AbortController();
  /** Pods and namespaces (kube-pod-cache.ts), on the same connection as the Nodes. */
  readonly podCache: PodCache;
  /** NetworkPolicies (kube-policy-cache.ts), on the same connection. */
  readonly policyCache: PolicyCache;
  /** IP pools as IPPool objects, when the configuration asks for them (`pools: true`). */
  readonly pools?: KubePoolStore;

  private constructor(o: KubeStoreOptions) {
    this.#o = o;
    this.description = `kubernetes ${o.connection.server} (${o.connection.source})`;
    this.#client = new KubeClient(o.connection, {
      ...(o.connect ? { connect: o.connect } : {}),
      ...(o.requestTimeoutMs ? { requestTimeoutMs: o.requestTimeoutMs } : {}),
    });
    this.#nodes = new Reflector<NodeRecord>({
      client: this.#client,
      path: '/api/v1/nodes',
      decode: nodeFromObject,
      log: o.log ?? (() => undefined),
    });
    this.podCache = new PodCache({
      client: this.#client,
      nodeName: o.nodeName,
      log: o.log ?? (() => undefined),
    });
    this.policyCache = new PolicyCache({ client: this.#client, log: o.log ?? (() => undefined) });
    if (o.pools)
      this.pools = new KubePoolStore({
        client: this.#client,
        where: this.description,
        log: o.log ?? (() => undefined),
      });
  }

  /** Starts the Node, Pod, Namespace and NetworkPolicy reflectors (and the IPPool one with `pools`); an unreachable API server only shows in health(). */
  static open(o: KubeStoreOptions): KubeStore {
    const store = new KubeStore(o);
    store.#nodes.start();
    store.podCache.start();
    store.policyCache.start();
    store.pools?.start();
    return store;
  }

  /** Nodes and IPPools skipped as invalid so far (each object version counted once). */
  get invalidRecords(): number {
    return this.#nodes.stats.invalidObjects + (this.pools?.invalidObjects ?? 0);
  }

  async #synced(opts: OpOptions, what: string): Promise<void> {
    throwIfAborted(this.#closed.signal, `${this.description}: closed`);
    if (this.#nodes.synced) return;
    const signal = opts.signal;
    // Not through an outage: the first failed list says there is no answer (the remembered pod CIDRs
    // stand in at start, cluster-node.ts), as an unreachable etcd does.
    await Promise.race([
      this.#nodes.waitAttempted(),
      new Promise<void>((resolve) => {
        if (signal?.aborted) resolve();
        signal?.addEventListener('abort', () => resolve(), { once: true });
      }),
    ]);
    if (!this.#nodes.synced) {
      throw Object.assign(
        storeError(`${this.description}: ${what}: no list yet: ${this.#nodes.health().error ?? ''}`),
        {
          unreachable: true,
        },
      );
    }
  }

  #stored(name: string): StoredNode | undefined {
    const node = this.#nodes.get(name);
    return node === undefined ? undefined : { node, version: this.#versionOf(name) };
  }

  /** The resourceVersion the cache holds for a Node (the reflector keeps it beside the record). */
  #versionOf(name: string): string {
    return this.#nodes.versionOf(name) ?? '';
  }

  async getNode(name: string, opts: OpOptions = {}): Promise<StoredNode | undefined> {
    await this.#synced(opts, `getNode ${name}`);
    return this.#stored(name);
  }

  async listNodes(opts: OpOptions = {}): Promise<NodeList> {
    await this.#synced(opts, 'listNodes');
    const nodes = this.#nodes.keys().map((k) => this.#stored(k) as StoredNode);
    return { revision: this.#nodes.resourceVersion ?? '', nodes: nodes.sort(byName) };
  }

  /**
   * Publishes this agent's part of its own Node (the annotation); the rest of `node` must agree with
   * the Node as the API server holds it (its spec.podCIDRs, one of its InternalIPs), else ERR_STORE
   * says which. Compare-and-swap on the resourceVersion.
   */
  async putNode(node: NodeRecord, precondition: Precondition, opts: OpOptions = {}): Promise<PutResult> {
    const what = `${this.description}: putNode ${node.name}`;
    if (node.name !== this.#o.nodeName)
      throw storeError(`${what}: an agent writes only its own Node (${this.#o.nodeName})`);
    const path = `/api/v1/nodes/${encodeURIComponent(node.name)}`;
    const r = await this.#client.request('GET', path, opts.signal ? { signal: opts.signal } : {});
    if (r.status === 404)
      throw storeError(`${what}: no such Node in the API server (the kubelet registers it)`);
    if (r.status !== 200)
      throw new KubeApiError(`${what}: HTTP ${r.status}`, { status: r.status, unreachable: r.status >= 500 });
    const object = JSON.parse(r.body) as WireNode & { metadata: { resourceVersion: string } };
    const rv = object.metadata.resourceVersion;
    if (precondition === 'absent' || precondition.version !== rv) {
      return { ok: false, current: this.#currentOf(object, node.name) };
    }
    const addresses = internalIPs(object);
    if (!addresses.includes(node.underlayIP)) {
      throw storeError(
        `${what}: underlay IP ${node.underlayIP} is not one of the Node's InternalIPs (${addresses.join(', ') || 'none'})`,
      );
    }
    const spec = object.spec ?? {};
    const cidrs = Array.isArray(spec.podCIDRs) ? spec.podCIDRs : [];
    if ([...cidrs].sort().join(',') !== [...node.podCIDRs].sort().join(',')) {
      throw storeError(
        `${what}: podCIDRs ${node.podCIDRs.join(',')} are not the Node's spec.podCIDRs (${cidrs.join(',') || 'none'})`,
      );
    }
    const published: Record<string, string> = { underlayIP: node.underlayIP };
    if (node.vtepMac) published.vtepMac = node.vtepMac;
    if (node.uplinkMac) published.uplinkMac = node.uplinkMac;
    const patch = {
      metadata: { resourceVersion: rv, annotations: { [NODE_ANNOTATION]: JSON.stringify(published) } },
    };
    const p = await this.#client.request('PATCH', path, {
      body: patch,
      contentType: 'application/merge-patch+json',
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    if (p.status === 409) return { ok: false, current: await this.#fetch(node.name, opts) };
    if (p.status !== 200)
      throw new KubeApiError(`${what}: PATCH: HTTP ${p.status}: ${p.body.slice(0, 200)}`, {
        status: p.status,
      });
    return {
      ok: true,
      version: (JSON.parse(p.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
    };
  }

  #currentOf(
    object: WireNode & { metadata: { resourceVersion: string } },
    name: string,
  ): StoredNode | undefined {
    try {
      return {
        node: nodeFromObject(object, { name, resourceVersion: object.metadata.resourceVersion }),
        version: object.metadata.resourceVersion,
      };
    } catch {
      return undefined; // not a valid record yet (no InternalIP): as absent, for registerNode
    }
  }

  async #fetch(name: string, opts: OpOptions): Promise<StoredNode | undefined> {
    const r = await this.#client.request(
      'GET',
      `/api/v1/nodes/${encodeURIComponent(name)}`,
      opts.signal ? { signal: opts.signal } : {},
    );
    if (r.status !== 200) return undefined;
    return this.#currentOf(JSON.parse(r.body), name);
  }

  async deleteNode(name: string): Promise<boolean> {
    throw storeError(
      `${this.description}: deleteNode ${name}: a node leaves when its Node object is deleted (kubectl delete node); podwire node remove is not needed`,
    );
  }

  /** The Node's spec.podCIDRs, waited for (the controller manager sets them shortly after the kubelet registers). */
  async leasePodCIDRs(nodeName: string, pool: PodCIDRPool, opts: OpOptions = {}): Promise<string[]> {
    void pool; // the controller manager's --cluster-cidr is the pool in Kubernetes
    for (;;) {
      const stored = await this.getNode(nodeName, opts);
      if (stored && stored.node.podCIDRs.length > 0) return stored.node.podCIDRs;
      throwIfAborted(opts.signal, `${this.description}: Node ${nodeName} has no spec.podCIDRs yet`);
      await pause(this.#o.leasePollMs ?? 500, opts.signal ?? this.#closed.signal);
    }
  }

  async releasePodCIDRs(nodeName: string): Promise<string[]> {
    throw storeError(
      `${this.description}: releasePodCIDRs ${nodeName}: the controller manager frees a Node's CIDRs when the Node is deleted`,
    );
  }

  async *watchNodes(opts: WatchOptions): AsyncGenerator<NodeEvent, void, undefined> {
    await this.#synced({ signal: opts.signal }, 'watchNodes');
    const queue = new EventQueue<NodeEvent>();
    const known = new Map<string, StoredNode>((opts.since?.nodes ?? []).map((s) => [s.node.name, s]));
    const unsubscribe = this.#nodes.subscribe((e) => {
      const revision = this.#nodes.resourceVersion ?? '';
      if (e.type === 'deleted') {
        known.delete(e.key);
        queue.push({ type: 'delete', node: e.old, revision });
      } else {
        const version = this.#versionOf(e.key);
        known.set(e.key, { node: e.object, version });
        queue.push({ type: 'put', node: e.object, version, revision });
      }
    });
    const stop = (): void => queue.end();
    this.#closed.signal.addEventListener('abort', stop, { once: true });
    try {
      // what changed since the caller's list (or everything, without one), then the live changes
      const current = (await this.listNodes({ signal: opts.signal })).nodes;
      queue.push(...diffNodes(known, current, this.#nodes.resourceVersion ?? ''));
      yield* queue.drain(opts.signal);
    } finally {
      unsubscribe();
      this.#closed.signal.removeEventListener('abort', stop);
    }
  }

  /** Unhealthy when any of the watches (Nodes, Pods, Namespaces) is, the first one named. */
  health(): StoreHealth {
    const nodes = this.#nodes.health();
    if (!nodes.ok) return { ...nodes, error: `nodes: ${nodes.error ?? 'unknown'}` };
    const pods = this.podCache.health();
    return pods.ok ? nodes : pods;
  }

  async close(): Promise<void> {
    this.#closed.abort();
    await Promise.all([
      this.#nodes.stop(),
      this.podCache.stop(),
      this.policyCache.stop(),
      this.pools?.stop(),
    ]);
    this.#client.close();
  }
}
