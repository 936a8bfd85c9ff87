/**
 * This node's pods told to the pod cache (cluster/kube-pod-cache.ts, store kubernetes only): by ADD
 * once it has wired the pod, by DEL, and at start (and after a GC sweep) from the IPAM claims, which
 * record each attachment's pod. Synchronous: no CNI call ever waits for the API server (decision 47).
 */
import type { AgentContext } from '../context.js';

/** "namespace/name" (CNI_ARGS) split; undefined when the runtime named no pod. */
function splitPod(pod: string | undefined): { namespace: string; name: string } | undefined {
  const slash = pod?.indexOf('/') ?? -1;
  if (pod === undefined || slash <= 0) return undefined;
  return { namespace: pod.slice(0, slash), name: pod.slice(slash + 1) };
}

/** An ADD's pod, wired: in the cache's view at once, labels null until its Pod object arrives. */
export function podAttached(
  ctx: AgentContext,
  att: { containerId: string; ifname: string; pod: string | undefined; podUid?: string | undefined },
  ips: string[],
): void {
  const pod = splitPod(att.pod);
  if (!ctx.pods || !pod) return;
  ctx.pods.attach({ containerId: att.containerId, ifname: att.ifname, ...pod, uid: att.podUid, ips });
}

export function podDetached(ctx: AgentContext, att: { containerId: string; ifname: string }): void {
  ctx.pods?.detach(att.containerId, att.ifname);
}

/** The cache's local attachments made equal to the IPAM claims (start, after a GC sweep). */
export async function syncLocalPods(ctx: AgentContext): Promise<void> {
  const cache = ctx.pods;
  if (!cache) return;
  const claimed = new Map<string, { containerId: string; ifname: string; pod: string; ips: string[] }>();
  for (const c of await ctx.ipam.list()) {
    if (c.pod === undefined) continue;
    const key = `${c.containerId}/${c.ifname}`;
    const entry = claimed.get(key) ?? { containerId: c.containerId, ifname: c.ifname, pod: c.pod, ips: [] };
    entry.ips.push(c.ip);
    claimed.set(key, entry);
  }
  for (const a of cache.attachments()) {
    if (!claimed.has(`${a.containerId}/${a.ifname}`)) cache.detach(a.containerId, a.ifname);
  }
  const known = new Set(cache.attachments().map((a) => `${a.containerId}/${a.ifname}`));
  for (const [key, c] of claimed) if (!known.has(key)) podAttached(ctx, c, c.ips);
}
