/**
 * Pods and namespaces from the API server, for NetworkPolicy (decision 47): one reflector on every
 * Pod of the cluster (`/api/v1/pods`: a policy's peers are pods anywhere, by label and IP) and one on
 * Namespaces, each object through its decoder (kube-pod.ts), read synchronously.
 *
 * This node's own pods are also known from their CNI ADDs (`attach`): an attachment names its pod by
 * CNI_ARGS K8S_POD_NAMESPACE/K8S_POD_NAME (and K8S_POD_UID when the runtime sends it) and is keyed by
 * the sandbox's container ID and interface. ADD never waits for the API server: a local pod whose Pod
 * object the watch has not delivered is a model Pod at once (labels `null`, the addresses its IPAM
 * gave, this node's name) and is filled in when the object comes. A local pod's addresses are always
 * the ones IPAM gave it (the node's own truth; the kubelet copies them into `status.podIPs` later).
 * An object whose UID is not the one the runtime named (a pod re-created under the same name that
 * the watch has not caught up with) is not taken for this attachment's pod.
 *
 * Subscribers hear every change of the view: a pod (cluster-wide view, local pods merged) or a
 * namespace, after the cache has it, synchronously.
 */

import type { KubeClient } from '../kube/kube-client.js';
import { type CacheEvent, type KubeLog, objectKey, Reflector } from '../kube/reflector.js';
import type { Namespace, Pod } from '../policy/model.js';
import { type CachedPod, namespaceFromObject, podFromObject } from './kube-pod.js';
import type { StoreHealth } from './store.js';

/** One local pod interface, as its ADD named it. */
export interface LocalAttachment {
  containerId: string;
  ifname: string;
  namespace: string;
  name: string;
  /** K8S_POD_UID, when the runtime sent it. */
  uid?: string | undefined;
  /** The addresses IPAM gave this interface, canonical. */
  ips: string[];
}

export type PodCacheEvent =
  | { kind: 'pod'; key: string; pod: Pod | undefined }
  | { kind: 'namespace'; name: string; namespace: Namespace | undefined };

export interface PodCacheOptions {
  client: KubeClient;
  /** This node's name: the `node` of a local pod not seen yet. */
  nodeName: string;
  log: KubeLog;
  backoff?: { initialMs: number; maxMs: number };
}

function attachmentKey(a: { containerId: string; ifname: string }): string {
  return `${a.containerId}/${a.ifname}`;
}

export class PodCache {
  readonly #o: PodCacheOptions;
  readonly #pods: Reflector<CachedPod>;
  readonly #namespaces: Reflector<Namespace>;
  /** Local attachments by container ID and interface. */
  readonly #attachments = new Map<string, LocalAttachment>();
  /** Local attachments by pod key (`namespace/name`). */
  readonly #local = new Map<string, Set<LocalAttachment>>();
  readonly #subscribers = new Set<(e: PodCacheEvent) => void>();
  #changes = 0;

  constructor(o: PodCacheOptions) {
    this.#o = o;
    const common = { client: o.client, log: o.log, ...(o.backoff ? { backoff: o.backoff } : {}) };
    this.#pods = new Reflector<CachedPod>({ ...common, path: '/api/v1/pods', decode: podFromObject });
    this.#namespaces = new Reflector<Namespace>({
      ...common,
      path: '/api/v1/namespaces',
      decode: namespaceFromObject,
    });
    this.#pods.subscribe((e) => this.#podChanged(e));
    this.#namespaces.subscribe((e) =>
      this.#emit({ kind: 'namespace', name: e.key, namespace: e.type === 'deleted' ? undefined : e.object }),
    );
  }

  start(): void {
    this.#pods.start();
    this.#namespaces.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.#pods.stop(), this.#namespaces.stop()]);
  }

  /** Resolves once both collections are listed (or the cache stops). */
  async waitSynced(): Promise<void> {
    await Promise.all([this.#pods.waitSynced(), this.#namespaces.waitSynced()]);
  }

  get synced(): boolean {
    return this.#pods.synced && this.#namespaces.synced;
  }

  /** Unhealthy when either watch is (named in the error). */
  health(): StoreHealth {
    for (const [what, r] of [
      ['pods', this.#pods],
      ['namespaces', this.#namespaces],
    ] as const) {
      const h = r.health();
      if (!h.ok) return { ...h, error: `${what}: ${h.error ?? 'unknown'}` };
    }
    return this.#pods.health();
  }

  /** Objects skipped as malformed so far, pods and namespaces. */
  get invalidObjects(): number {
    return this.#pods.stats.invalidObjects + this.#namespaces.stats.invalidObjects;
  }

  /** The reflectors' counters (lists, relists, watches, bookmarks, errors). */
  stats(): { pods: Reflector<CachedPod>['stats']; namespaces: Reflector<Namespace>['stats'] } {
    return { pods: this.#pods.stats, namespaces: this.#namespaces.stats };
  }

  /** The last resourceVersions the caches reflect. */
  resourceVersions(): { pods: string | undefined; namespaces: string | undefined } {
    return { pods: this.#pods.resourceVersion, namespaces: this.#namespaces.resourceVersion };
  }

  /** A pod of this node by namespace and name (attached here), with what the watch knows of it. */
  localPod(namespace: string, name: string): Pod | undefined {
    const key = objectKey({ namespace, name });
    return this.#local.has(key) ? this.#view(key) : undefined;
  }

  /** Every pod of this node, as `localPod` gives them. */
  localPods(): Pod[] {
    return [...this.#local.keys()].map((k) => this.#view(k) as Pod);
  }

  /** A pod anywhere in the cluster. */
  pod(namespace: string, name: string): Pod | undefined {
    return this.#view(objectKey({ namespace, name }));
  }

  /** Every pod of the cluster (the watch's), with this node's pods not yet delivered among them. */
  pods(): Pod[] {
    const keys = new Set([...this.#pods.keys(), ...this.#local.keys()]);
    const attached = this.#attachedAddresses();
    return [...keys].map((k) => this.#view(k, attached)).filter((p): p is Pod => p !== undefined);
  }

  /** Every address an attachment of this node holds now. */
  #attachedAddresses(): Set<string> {
    return new Set([...this.#attachments.values()].flatMap((a) => a.ips));
  }

  /**
   * Every pod as the watch has it, without this node's attachments merged in (each `labels` set, its
   * `ips` the object's `status.podIPs`): for a reader that keeps its own local attachments, as the
   * policy controller's `PolicySource.pods` does.
   */
  watchedPods(): Pod[] {
    return this.#pods.list().map((c) => c.pod);
  }

  /** A namespace's labels; undefined when the watch does not know the namespace. */
  namespaceLabels(name: string): Record<string, string> | undefined {
    return this.#namespaces.get(name)?.labels;
  }

  namespaces(): Namespace[] {
    return this.#namespaces.list();
  }

  /** Calls `fn` for every change of the view from now on, synchronously. */
  subscribe(fn: (e: PodCacheEvent) => void): () => void {
    this.#subscribers.add(fn);
    return () => this.#subscribers.delete(fn);
  }

  /** A local interface ADDed (or found at start): the pod is in the view at once. Synchronous. */
  attach(a: LocalAttachment): void {
    const old = this.#attachments.get(attachmentKey(a));
    if (old) this.#unlink(old);
    const key = objectKey(a);
    this.#attachments.set(attachmentKey(a), a);
    let set = this.#local.get(key);
    if (!set) {
      set = new Set();
      this.#local.set(key, set);
    }
    set.add(a);
    this.#emit({ kind: 'pod', key, pod: this.#view(key) });
    this.#emitHolders(a.ips, key);
  }

  /** The local attachments known, as (containerId, ifname). */
  attachments(): LocalAttachment[] {
    return [...this.#attachments.values()];
  }

  /** A local interface DELeted: gone from the view unless the watch still has its pod. */
  detach(containerId: string, ifname: string): void {
    const a = this.#attachments.get(attachmentKey({ containerId, ifname }));
    if (!a) return;
    this.#attachments.delete(attachmentKey(a));
    this.#unlink(a);
    const key = objectKey(a);
    this.#emit({ kind: 'pod', key, pod: this.#view(key) });
    this.#emitHolders(a.ips, key);
  }

  /**
   * The other pods whose view an attachment of `ips` changed (an unattached object with one of those
   * addresses in its status: it loses or regains it), each told as a change of its own.
   */
  #emitHolders(ips: readonly string[], except: string): void {
    for (const c of this.#pods.list()) {
      const key = objectKey(c.pod);
      if (key === except || this.#local.has(key) || !c.pod.ips.some((ip) => ips.includes(ip))) continue;
      this.#emit({ kind: 'pod', key, pod: this.#view(key) });
    }
  }

  #unlink(a: LocalAttachment): void {
    const key = objectKey(a);
    const set = this.#local.get(key);
    set?.delete(a);
    if (set?.size === 0) this.#local.delete(key);
  }

  /**
   * The view of one pod: the watch's object, merged with this node's attachments of it. An object
   * without an attachment here does not keep an address that one of this node's attachments holds now:
   * it is a stale status (a pod deleted, its object still terminating, its address already given to a
   * new pod here), and the address on this node's wire is the attached pod's. Left in, both would
   * claim it: two local pods with one address in the policy compiler, or a peer with the wrong labels.
   */
  #view(key: string, attached?: Set<string>): Pod | undefined {
    const cached = this.#pods.get(key);
    const local = this.#local.get(key);
    if (!local || local.size === 0) {
      if (!cached || cached.pod.ips.length === 0 || this.#attachments.size === 0) return cached?.pod;
      const held = attached ?? this.#attachedAddresses();
      if (!cached.pod.ips.some((ip) => held.has(ip))) return cached.pod;
      return { ...cached.pod, ips: cached.pod.ips.filter((ip) => !held.has(ip)) };
    }
    const attachments = [...local];
    const ips = [...new Set(attachments.flatMap((a) => a.ips))];
    const uids = attachments.map((a) => a.uid).filter((u): u is string => u !== undefined);
    // The object stands for this pod unless the runtime named another UID (a re-created namesake).
    if (cached && (uids.length === 0 || uids.includes(cached.uid))) return { ...cached.pod, ips };
    const [namespace, name] = [attachments[0]?.namespace ?? '', attachments[0]?.name ?? ''];
    return { namespace, name, labels: null, ips, ports: [], hostNetwork: false, node: this.#o.nodeName };
  }

  #podChanged(e: CacheEvent<CachedPod>): void {
    this.#emit({ kind: 'pod', key: e.key, pod: this.#view(e.key) });
  }

  /** Changes emitted so far (a resync that finds nothing changed emits none). */
  get changes(): number {
    return this.#changes;
  }

  #emit(e: PodCacheEvent): void {
    this.#changes++;
    for (const fn of [...this.#subscribers]) {
      try {
        fn(e);
      } catch (err) {
        // a subscriber's failure is its own; the cache and the other subscribers go on
        this.#o.log('kube-subscriber-failed', { what: e.kind, error: (err as Error).message });
      }
    }
  }
}
