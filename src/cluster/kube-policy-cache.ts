/**
 * NetworkPolicies from the API server (`/apis/networking.k8s.io/v1/networkpolicies`, every
 * namespace), each through the policy decoder (policy/decode-policy.ts), read synchronously.
 *
 * A policy the decoder refuses is not dropped: dropping it would open what it meant to close. It
 * stands in the cache as what it can only be read as, fail closed: every pod of its namespace
 * isolated in both directions with nothing allowed (the namespace is the one thing known for sure
 * of a stored object). The refusal is logged with the reason and counted (`refused`); a corrected
 * version of the object replaces it.
 */
import type { KubeClient } from '../kube/kube-client.js';
import { type CacheEvent, type KubeLog, type ObjectMeta, Reflector } from '../kube/reflector.js';
import { decodeNetworkPolicy } from '../policy/decode-policy.js';
import type { NetworkPolicy } from '../policy/model.js';
import type { StoreHealth } from './store.js';

export interface PolicyCacheOptions {
  client: KubeClient;
  log: KubeLog;
  backoff?: { initialMs: number; maxMs: number };
}

/** What a refused policy of `namespace` enforces: its namespace's pods isolated both ways. */
export function failClosedPolicy(namespace: string, name: string): NetworkPolicy {
  return {
    namespace,
    name,
    podSelector: { matchLabels: {}, matchExpressions: [] },
    policyTypes: ['Ingress', 'Egress'],
    ingress: [],
    egress: [],
  };
}

export class PolicyCache {
  readonly #policies: Reflector<NetworkPolicy>;
  readonly #log: KubeLog;
  /** Keys of the policies in the cache as their fail-closed stand-in. */
  readonly #refused = new Set<string>();
  /** The resourceVersion last logged as refused, per key: a relist does not log it again. */
  readonly #reported = new Map<string, string>();

  constructor(o: PolicyCacheOptions) {
    this.#log = o.log;
    this.#policies = new Reflector<NetworkPolicy>({
      client: o.client,
      path: '/apis/networking.k8s.io/v1/networkpolicies',
      log: o.log,
      decode: (object, meta) => this.#decode(object, meta),
      ...(o.backoff ? { backoff: o.backoff } : {}),
    });
    this.#policies.subscribe((e) => {
      if (e.type !== 'deleted') return;
      this.#refused.delete(e.key);
      this.#reported.delete(e.key);
    });
  }

  #decode(object: unknown, meta: ObjectMeta): NetworkPolicy {
    const key = `${meta.namespace ?? ''}/${meta.name}`;
    try {
      const policy = decodeNetworkPolicy(object);
      this.#refused.delete(key);
      return policy;
    } catch (err) {
      // No namespace: not a stored NetworkPolicy at all (the reflector skips it as invalid).
      if (!meta.namespace) throw err;
      this.#refused.add(key);
      if (this.#reported.get(key) === meta.resourceVersion)
        return failClosedPolicy(meta.namespace, meta.name);
      this.#reported.set(key, meta.resourceVersion);
      this.#log('kube-policy-refused', {
        policy: key,
        resourceVersion: meta.resourceVersion,
        reason: (err as Error).message,
        enforced: 'every pod of the namespace isolated, ingress and egress',
      });
      return failClosedPolicy(meta.namespace, meta.name);
    }
  }

  start(): void {
    this.#policies.start();
  }

  stop(): Promise<void> {
    return this.#policies.stop();
  }

  get synced(): boolean {
    return this.#policies.synced;
  }

  waitSynced(): Promise<void> {
    return this.#policies.waitSynced();
  }

  health(): StoreHealth {
    const h = this.#policies.health();
    return h.ok ? h : { ...h, error: `networkpolicies: ${h.error ?? 'unknown'}` };
  }

  policies(): NetworkPolicy[] {
    return this.#policies.list();
  }

  /** Policies in force as their fail-closed stand-in (`namespace/name`). */
  refused(): string[] {
    return [...this.#refused].sort();
  }

  stats(): Reflector<NetworkPolicy>['stats'] {
    return this.#policies.stats;
  }

  subscribe(fn: (e: CacheEvent<NetworkPolicy>) => void): () => void {
    return this.#policies.subscribe(fn);
  }
}
