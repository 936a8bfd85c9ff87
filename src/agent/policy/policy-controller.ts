/**
 * NetworkPolicy on this node: what the watch layer knows (policies, pods, namespaces; this node's
 * wired pods merged in by the pod cache) compiled into each local pod's allowed peers and ports and
 * handed to the datapath's policy backend, one complete state at a time.
 *
 * - Coalescing: any number of changes while an apply runs make one more apply after it, built from
 *   the state at that moment (never a queue of stale states).
 * - Serialised: one `apply` at a time, as the `PolicyBackend` contract wants.
 * - Fail closed: ADD tells the pod cache of the pod and waits for `settled()` before the pod's port
 *   forwards, so the port carries nothing before an apply that includes the pod has succeeded. A pod
 *   whose Pod object the watch has not delivered yet has `labels: null`, which the compiler isolates
 *   in every direction a policy of its namespace has; when the object comes, the next apply opens
 *   what its labels allow.
 * - The API server away: the caches keep the last known state, so the policies stay in force. An
 *   agent that starts while it is away (nothing listed yet) enforces the snapshot of the last complete
 *   state it enforced (policy-snapshot.ts), its own pods by name and address; with no snapshot either,
 *   every local pod is isolated in both directions until the lists come.
 * - A failed apply leaves the previous state in the datapath (the backend's contract); the waiting
 *   ADDs fail with its error, and the controller tries again with backoff until one succeeds.
 */
import { Backoff } from '../../cluster/backoff.js';
import type { PolicyBackend, RuleCounters } from '../../datapath/policy-backend.js';
import type { CompileInput } from '../../policy/compile.js';
import type { Namespace, NetworkPolicy, Pod, PodPolicy } from '../../policy/model.js';
import type { Logger } from '../log.js';
import { loadSnapshot, type PolicySnapshot, saveSnapshot } from './policy-snapshot.js';

export type PolicySourceChange = 'policies' | 'pods' | 'namespaces';

/** What the controller reads of the cluster: the watch layer's caches, read synchronously. */
export interface PolicySource {
  policies(): readonly NetworkPolicy[];
  /** Every pod of the cluster, this node's wired pods among them (labels `null` until delivered). */
  pods(): readonly Pod[];
  namespaces(): readonly Namespace[];
  /** Whether all three have been listed at least once (after that, they stay served through outages). */
  synced(): boolean;
  /** Policies in force as their fail-closed stand-in (`namespace/name`): the decoder refused them. */
  refused?(): string[];
  /** Calls `listener` after any change of the three (and when they become synced); returns the unsubscribe. */
  onChange(listener: (what: PolicySourceChange) => void): () => void;
}

export interface PolicyControllerOptions {
  node: string;
  source: PolicySource;
  backend: PolicyBackend;
  compile: (input: CompileInput) => PodPolicy[];
  log: Logger;
  /** Where the snapshot of the last complete state is kept; undefined: none. */
  stateDir?: string | undefined;
  backoff?: { initialMs: number; maxMs: number };
  /** The longest a snapshot of pod changes alone waits to be written (policy changes: before their apply). */
  snapshotDelayMs?: number;
}

/** Where the state applied came from. */
export type PolicyMode = 'live' | 'snapshot' | 'unknown';

/** The isolating "policy" of a pod while no NetworkPolicy is known at all. */
export const UNKNOWN_POLICIES = '(NetworkPolicies not listed yet: isolated)';

interface Waiter {
  /** The first apply generation that includes what the waiter waits for. */
  generation: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class PolicyController {
  readonly #opts: PolicyControllerOptions;
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
  #snapshot: PolicySnapshot | undefined;
  #mode: PolicyMode = 'unknown';
  /** The policies (or namespaces) changed since the snapshot was written: written before the next apply. */
  #policiesDirty = true;
  #podsDirty = true;
  #snapshotTimer: NodeJS.Timeout | undefined;
  #lastApplied: PodPolicy[] = [];

  constructor(opts: PolicyControllerOptions) {
    this.#opts = opts;
    this.#backoff = new Backoff(opts.backoff ?? { initialMs: 100, maxMs: 5000 });
  }

  /** Starts the backend, subscribes to the caches and applies the first state. */
  async start(): Promise<void> {
    const { stateDir, node, source, log } = this.#opts;
    if (!source.synced() && stateDir !== undefined) {
      const s = loadSnapshot(stateDir, node);
      if (s) {
        this.#snapshot = s;
        log.warn('NetworkPolicies not listed yet: enforcing the snapshot of the last known state', {
          savedAt: s.savedAt,
          policies: s.policies.length,
        });
      } else {
        log.warn(
          'NetworkPolicies not listed yet and no snapshot: this node isolates its pods until they are',
          {},
        );
      }
    }
    await this.#opts.backend.start();
    this.#unsubscribe = source.onChange((what) => {
      if (what === 'pods') this.#podsDirty = true;
      else this.#policiesDirty = true;
      this.#changed();
    });
    await this.settled();
  }

  /** Stops following changes; what is installed stays in force (the agent's restart keeps it). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    clearTimeout(this.#snapshotTimer);
    await this.#running?.catch(() => undefined);
    for (const w of this.#waiters.splice(0)) w.reject(new Error('policy controller stopped'));
  }

  /** Resolves once an apply that includes every change so far has succeeded; rejects with its failure. */
  settled(): Promise<void> {
    this.#generation++;
    const promise = new Promise<void>((resolve, reject) => {
      this.#waiters.push({ generation: this.#generation, resolve, reject });
    });
    this.#kick();
    return promise;
  }

  /** The last apply's failure, while no apply has succeeded since; for `/readyz`. */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  get applies(): number {
    return this.#applies;
  }

  /** Where the state in force came from: the live caches, the snapshot, or nothing (all isolated). */
  get mode(): PolicyMode {
    return this.#mode;
  }

  /** Allowed packets per rule and denied packets per pod, read from the datapath. */
  counters(): Promise<RuleCounters[]> {
    return this.#opts.backend.counters();
  }

  /** Policies the decoder refused, in force as their fail-closed stand-in. */
  refused(): string[] {
    return this.#opts.source.refused?.() ?? [];
  }

  /** What the last successful apply installed. */
  applied(): readonly PodPolicy[] {
    return this.#lastApplied;
  }

  /** The pods, policies and namespaces the next apply compiles, and where they come from. */
  input(): { mode: PolicyMode; input: CompileInput | undefined } {
    const { node, source } = this.#opts;
    if (source.synced()) {
      this.#snapshot = undefined;
      return {
        mode: 'live',
        input: { policies: source.policies(), pods: source.pods(), namespaces: source.namespaces(), node },
      };
    }
    const s = this.#snapshot;
    if (!s) return { mode: 'unknown', input: undefined };
    // The snapshot's pods, with what this node knows now of its own: a local pod the snapshot has
    // under the same name and one of the same addresses is that pod (its labels and ports); any other
    // local pod is new since (labels null: fail closed).
    const pods = new Map<string, Pod>();
    const wasLocal = new Map<string, Pod>();
    // This node's pods are the ones it has now (a pod deleted since must not lend its rules to a new
    // pod that got its address); the others' are the snapshot's.
    for (const p of s.pods) (p.node === node ? wasLocal : pods).set(`${p.namespace}/${p.name}`, p);
    for (const p of source.pods()) {
      const key = `${p.namespace}/${p.name}`;
      const known = wasLocal.get(key) ?? pods.get(key);
      const same = known !== undefined && p.labels === null && known.ips.some((ip) => p.ips.includes(ip));
      pods.set(key, same ? { ...known, ips: [...p.ips], node } : p);
    }
    return {
      mode: 'snapshot',
      input: { policies: s.policies, pods: [...pods.values()], namespaces: s.namespaces, node },
    };
  }

  #changed(): void {
    this.#generation++;
    this.#kick();
  }

  #kick(): void {
    if (this.#running !== undefined || this.#stopped) return;
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
  }

  /** Every local pod isolated both ways: the state while nothing at all is known. */
  #isolateAll(): PodPolicy[] {
    const isolated = { policies: [UNKNOWN_POLICIES], rules: [] };
    return this.#opts.source
      .pods()
      .filter((p) => p.node === this.#opts.node && p.ips.length > 0)
      .map((p) => ({
        namespace: p.namespace,
        name: p.name,
        ips: [...p.ips],
        ingress: isolated,
        egress: isolated,
      }));
  }

  async #loop(): Promise<void> {
    while (!this.#stopped && this.#appliedGeneration < this.#generation) {
      const generation = this.#generation;
      try {
        const { mode, input } = this.input();
        const pods = input ? this.#opts.compile(input) : this.#isolateAll();
        if (mode === 'live' && this.#policiesDirty) this.#trySaveSnapshot(input);
        await this.#opts.backend.apply(pods);
        if (mode !== this.#mode) this.#opts.log.info('NetworkPolicy state in force', { from: mode });
        this.#mode = mode;
        this.#lastApplied = pods;
        this.#applies++;
        this.#appliedGeneration = generation;
        this.#lastError = undefined;
        this.#backoff.reset();
        this.#settle(generation);
        if (mode === 'live' && this.#podsDirty) this.#scheduleSnapshot();
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

  /** Written before an apply whose policies changed: the snapshot is never older than the datapath's policies. */
  #saveSnapshot(input: CompileInput | undefined): void {
    const { stateDir, node } = this.#opts;
    if (stateDir === undefined || !input) return;
    clearTimeout(this.#snapshotTimer);
    this.#snapshotTimer = undefined;
    saveSnapshot(stateDir, node, {
      policies: [...input.policies],
      namespaces: [...input.namespaces],
      pods: [...input.pods],
    });
    this.#policiesDirty = false;
    this.#podsDirty = false;
  }

  /** A snapshot that cannot be written is logged; the policies are still applied (the datapath is the enforcement). */
  #trySaveSnapshot(input: CompileInput | undefined): void {
    try {
      this.#saveSnapshot(input);
    } catch (err) {
      this.#opts.log.warn('policy snapshot not written', { reason: (err as Error).message });
    }
  }

  /** Pod changes alone: written a little later, coalesced. */
  #scheduleSnapshot(): void {
    if (this.#snapshotTimer !== undefined || this.#opts.stateDir === undefined) return;
    this.#snapshotTimer = setTimeout(() => {
      this.#snapshotTimer = undefined;
      if (this.#stopped) return;
      const { mode, input } = this.input();
      if (mode === 'live') this.#trySaveSnapshot(input);
    }, this.#opts.snapshotDelayMs ?? 1000);
    this.#snapshotTimer.unref();
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
