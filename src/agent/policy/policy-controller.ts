/**
 * NetworkPolicy on this node: what the watch layer knows (policies, pods, namespaces), and the pods
 * this node wired, compiled into each local pod's allowed peers and ports and handed to the
 * datapath's policy backend, one complete state at a time.
 *
 * - Coalescing: any number of changes while an apply runs make one more apply after it, built from
 *   the state at that moment (never a queue of stale states).
 * - Serialised: one `apply` at a time, as the `PolicyBackend` contract wants.
 * - Fail closed: ADD calls `podAttached` before the pod's port forwards, and the port is enabled
 *   only once an apply that includes the pod has succeeded. A pod whose Pod object the watch has not
 *   delivered yet goes in with `labels: null`, which the compiler isolates in every direction a
 *   policy of its namespace has; when the object comes, the next apply opens what its labels allow.
 * - The API server away: the caches keep the last known state, so the policies stay in force.
 * - A failed apply leaves the previous state in the datapath (the backend's contract); the waiting
 *   ADDs fail with its error, and the controller tries again with backoff until one succeeds.
 */
import { Backoff } from '../../cluster/backoff.js';
import type { PolicyBackend } from '../../datapath/policy-backend.js';
import type { Namespace, NetworkPolicy, Pod, PodPolicy } from '../../policy/model.js';
import type { Logger } from '../log.js';

/** What the controller reads of the cluster: the watch layer's caches, read synchronously. */
export interface PolicySource {
  policies(): readonly NetworkPolicy[];
  /** Every pod of the cluster known to the watch (`labels` set). */
  pods(): readonly Pod[];
  namespaces(): readonly Namespace[];
  /** Calls `listener` after any change of the three; returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}

export interface CompileInput {
  policies: readonly NetworkPolicy[];
  pods: readonly Pod[];
  namespaces: readonly Namespace[];
  node: string;
}

/** A pod this node wired: known from its ADD (or reconcile) before the watch may have it. */
export interface LocalAttachment {
  containerId: string;
  namespace: string;
  name: string;
  ips: string[];
}

export interface PolicyControllerOptions {
  node: string;
  source: PolicySource;
  backend: PolicyBackend;
  compile: (input: CompileInput) => PodPolicy[];
  log: Logger;
  backoff?: { initialMs: number; maxMs: number };
}

interface Waiter {
  /** The first apply generation that includes what the waiter waits for. */
  generation: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class PolicyController {
  readonly #opts: PolicyControllerOptions;
  readonly #local = new Map<string, LocalAttachment>();
  readonly #backoff: Backoff;
  #unsubscribe: (() => void) | undefined;
  /** Bumped on every change; an apply covers every change up to the generation it started at. */
  #generation = 0;
  #appliedGeneration = 0;
  #running: Promise<void> | undefined;
  #waiters: Waiter[] = [];
  #stopped = false;
  #lastError: string | undefined;
  #applies = 0;

  constructor(opts: PolicyControllerOptions) {
    this.#opts = opts;
    this.#backoff = new Backoff(opts.backoff ?? { initialMs: 100, maxMs: 5000 });
  }

  /** Starts the backend, subscribes to the caches and applies the first state. */
  async start(): Promise<void> {
    await this.#opts.backend.start();
    this.#unsubscribe = this.#opts.source.onChange(() => this.#changed());
    await this.#sync();
  }

  /** Stops following changes; what is installed stays in force (the agent's restart keeps it). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    await this.#running?.catch(() => undefined);
    for (const w of this.#waiters.splice(0)) w.reject(new Error('policy controller stopped'));
  }

  /** The pod this node is wiring; resolves once the datapath enforces its policies. */
  podAttached(pod: LocalAttachment): Promise<void> {
    this.#local.set(pod.containerId, { ...pod, ips: [...pod.ips] });
    return this.#sync();
  }

  /** The pod is gone from this node; its rules go with the next apply (not waited for). */
  podDetached(containerId: string): void {
    if (this.#local.delete(containerId)) this.#changed();
  }

  /** The last apply's failure, while no apply has succeeded since; for `/readyz`. */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  get applies(): number {
    return this.#applies;
  }

  /** The pods as the compiler sees them: the watch's, and this node's own wired pods it lacks. */
  desiredPods(): Pod[] {
    const { node, source } = this.#opts;
    const pods = new Map<string, Pod>();
    for (const pod of source.pods()) pods.set(`${pod.namespace}/${pod.name}`, pod);
    for (const local of this.#local.values()) {
      const key = `${local.namespace}/${local.name}`;
      const known = pods.get(key);
      if (known === undefined || known.node !== node) {
        // Not delivered yet (or still unscheduled in the cache): wired here, labels unknown.
        pods.set(key, {
          namespace: local.namespace,
          name: local.name,
          labels: null,
          ips: [...local.ips],
          ports: [],
          hostNetwork: false,
          node,
        });
      } else if (known.ips.length === 0) {
        // The object came before the kubelet reported the addresses: the node knows them.
        pods.set(key, { ...known, ips: [...local.ips] });
      }
    }
    return [...pods.values()];
  }

  #changed(): void {
    this.#generation++;
    this.#kick();
  }

  #sync(): Promise<void> {
    this.#generation++;
    const promise = new Promise<void>((resolve, reject) => {
      this.#waiters.push({ generation: this.#generation, resolve, reject });
    });
    this.#kick();
    return promise;
  }

  #kick(): void {
    if (this.#running !== undefined || this.#stopped) return;
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
  }

  async #loop(): Promise<void> {
    while (!this.#stopped && this.#appliedGeneration < this.#generation) {
      const generation = this.#generation;
      try {
        const pods = this.#opts.compile({
          policies: this.#opts.source.policies(),
          pods: this.desiredPods(),
          namespaces: this.#opts.source.namespaces(),
          node: this.#opts.node,
        });
        await this.#opts.backend.apply(pods);
        this.#applies++;
        this.#appliedGeneration = generation;
        this.#lastError = undefined;
        this.#backoff.reset();
        this.#settle(generation);
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        this.#lastError = reason;
        this.#opts.log.error('policy apply failed', { reason, generation });
        // The waiters of this generation fail (their ADD is refused); later changes keep retrying.
        this.#fail(generation, err);
        await new Promise((r) => setTimeout(r, this.#backoff.next()).unref());
      }
    }
  }

  #settle(generation: number): void {
    this.#waiters = this.#waiters.filter((w) => {
      if (w.generation > generation) return true;
      w.resolve();
      return false;
    });
  }

  #fail(generation: number, err: unknown): void {
    this.#waiters = this.#waiters.filter((w) => {
      if (w.generation > generation) return true;
      w.reject(err);
      return false;
    });
  }
}
