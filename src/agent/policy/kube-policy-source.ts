/**
 * The policy controller's `PolicySource` over the API server's caches: NetworkPolicies
 * (cluster/kube-policy-cache.ts), and Pods and Namespaces with this node's wired pods merged in
 * (cluster/kube-pod-cache.ts). Synced once all three collections have been listed; the moment they
 * are is itself a change.
 */
import type { PodCache } from '../../cluster/kube-pod-cache.js';
import type { PolicyCache } from '../../cluster/kube-policy-cache.js';
import type { Namespace, NetworkPolicy, Pod } from '../../policy/model.js';
import type { PolicySource, PolicySourceChange } from './policy-controller.js';

export class KubePolicySource implements PolicySource {
  readonly #pods: PodCache;
  readonly #policies: PolicyCache;

  constructor(pods: PodCache, policies: PolicyCache) {
    this.#pods = pods;
    this.#policies = policies;
  }

  policies(): readonly NetworkPolicy[] {
    return this.#policies.policies();
  }

  pods(): readonly Pod[] {
    return this.#pods.pods();
  }

  namespaces(): readonly Namespace[] {
    return this.#pods.namespaces();
  }

  refused(): string[] {
    return this.#policies.refused();
  }

  synced(): boolean {
    return this.#pods.synced && this.#policies.synced;
  }

  onChange(listener: (what: PolicySourceChange) => void): () => void {
    let live = true;
    const offPods = this.#pods.subscribe((e) => listener(e.kind === 'pod' ? 'pods' : 'namespaces'));
    const offPolicies = this.#policies.subscribe(() => listener('policies'));
    // The first complete view: a change even when the lists brought no event (an empty cluster).
    void Promise.all([this.#pods.waitSynced(), this.#policies.waitSynced()]).then(() => {
      if (live && this.synced()) listener('policies');
    });
    return () => {
      live = false;
      offPods();
      offPolicies();
    };
  }
}
