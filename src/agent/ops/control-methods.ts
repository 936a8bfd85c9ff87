/** What the control socket answers: the agent's state as the CLI shows it. */

import { podMac } from '../../base/pod-mac.js';
import { attachmentKey } from '../../ipam/store.js';
import { hostVethName } from '../cni/host-veth.js';
import { syncLocalPods } from '../cni/local-pods.js';
import { reconcile } from '../cni/reconcile.js';
import type { Scheduler } from '../cni/scheduler.js';
import type { AgentContext } from '../context.js';
import type { ControlMethod } from './control-server.js';
import { nodeIdentities } from './identities.js';
import { openDescriptors } from './open-fds.js';

export interface PodRow {
  pod: string | undefined;
  containerId: string;
  ifname: string;
  /** The CNI network the claims are recorded with; undefined for claims written before it was recorded. */
  network: string | undefined;
  addresses: string[];
  mac: string;
  hostVeth: string;
  /** Index of the host veth; undefined when it is missing (drift). */
  hostIfindex: number | undefined;
  createdAt: string;
}

export function controlMethods(
  ctx: AgentContext,
  scheduler: Scheduler,
  started: Date,
): Map<string, ControlMethod> {
  return new Map<string, ControlMethod>([
    ['status', async () => status(ctx, scheduler, started)],
    ['pods', async () => pods(ctx)],
    ['ipam', () => ipamUsage(ctx)],
    [
      'gc',
      async () => {
        const report = await reconcile(ctx, {
          serial: (key, fn) => scheduler.run(key, fn),
          busy: () => scheduler.activeKeys(),
        });
        await syncLocalPods(ctx);
        return report;
      },
    ],
    ['podCache', async () => podCache(ctx)],
    ['policy', async () => policy(ctx)],
    ['identities', async () => nodeIdentities(ctx)],
  ]);
}

async function status(ctx: AgentContext, scheduler: Scheduler, started: Date) {
  const claims = await ctx.ipam.list();
  const attachments = new Set(claims.map(attachmentKey));
  return {
    pid: process.pid,
    startedAt: started.toISOString(),
    podCIDRs: ctx.config.podCIDRs,
    datapath: {
      kind: ctx.datapath.kind,
      ...ctx.datapath.status(),
      podGuards: ctx.datapath.podGuards ?? 'on',
    },
    pods: attachments.size,
    requestsInFlight: scheduler.inFlight,
    announcementFrames: ctx.announcer.framesSent,
    openDescriptors: openDescriptors(),
    /** process.memoryUsage(), bytes: RSS, V8 heap, memory outside the heap (Buffers, native). */
    memory: process.memoryUsage(),
    cluster: ctx.cluster ? { node: ctx.cluster.record, ...ctx.cluster.status() } : undefined,
    /** Claims the IPAM stores cannot read: taken, owner unknown; an operator removes each file. */
    unreadableClaims: ctx.ipam
      .unreadable()
      .map((c) => ({ range: c.rangeId, ip: c.ip, file: c.where, reason: c.reason })),
    /** Egress masquerade (decision 20): on or off, and the destinations that keep the pod's source. */
    egress: ctx.egress
      ? { masquerade: true, keep: ctx.egress.keep, repairs: ctx.egress.repairs }
      : { masquerade: false },
  };
}

async function pods(ctx: AgentContext): Promise<PodRow[]> {
  const rows = new Map<string, PodRow>();
  for (const c of await ctx.ipam.list()) {
    const key = attachmentKey(c);
    let row = rows.get(key);
    if (!row) {
      const hostVeth = hostVethName(c.containerId, c.ifname);
      row = {
        pod: c.pod,
        containerId: c.containerId,
        ifname: c.ifname,
        network: c.network,
        addresses: [],
        mac: '',
        hostVeth,
        hostIfindex: ctx.nl.linkByName(hostVeth)?.index,
        createdAt: c.createdAt,
      };
      rows.set(key, row);
    }
    row.addresses.push(`${c.ip}/${c.prefixLength}`);
  }
  for (const row of rows.values()) row.mac = podMac(row.addresses.map((a) => a.split('/')[0] as string));
  return [...rows.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}

/**
 * Sizes and counts are decimal strings, all of them: an IPv6 range's size is past 2^53, which a JSON
 * number does not keep exactly in most readers (JavaScript's among them).
 */
export interface IpamRow {
  range: string;
  size: string;
  /** Taken addresses, unreadable claims included. */
  used: string;
  /** Claims the store cannot read: taken, owner unknown (store.ts, `UnreadableClaim`). */
  unreadable: Array<{ ip: string; file: string; reason: string }>;
}

async function ipamUsage(ctx: AgentContext): Promise<IpamRow[]> {
  await ctx.ipam.list(); // a fresh look at what the store cannot read (a file removed since is gone)
  const unreadable = ctx.ipam.unreadable();
  return ctx.ipam.usage().map((r) => ({
    range: r.rangeId,
    size: r.size.toString(),
    used: String(r.used),
    unreadable: unreadable
      .filter((c) => c.rangeId === r.rangeId)
      .map((c) => ({ ip: c.ip, file: c.where, reason: c.reason })),
  }));
}

/** The pod cache (store kubernetes): what the NetworkPolicy code will read, for tests and operators. */
function podCache(ctx: AgentContext) {
  const cache = ctx.pods;
  if (!cache) return { enabled: false };
  const byKey = (a: { namespace: string; name: string }, b: { namespace: string; name: string }) =>
    `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`);
  return {
    enabled: true,
    synced: cache.synced,
    health: cache.health(),
    resourceVersions: cache.resourceVersions(),
    invalidObjects: cache.invalidObjects,
    changes: cache.changes,
    stats: cache.stats(),
    pods: cache.pods().sort(byKey),
    localPods: cache.localPods().sort(byKey),
    namespaces: cache.namespaces().sort((a, b) => a.name.localeCompare(b.name)),
  };
}

/** NetworkPolicy on this node (`podwire policy`): each local pod's compiled policy and the datapath's counters. */
async function policy(ctx: AgentContext) {
  const controller = ctx.policy;
  if (!controller) {
    return {
      enabled: false,
      reason: ctx.pods
        ? `the ${ctx.datapath.kind} datapath has no policy backend`
        : 'cluster.store is not kubernetes: no NetworkPolicy is read',
    };
  }
  const counters = await controller.counters();
  return {
    enabled: true,
    mode: controller.mode,
    ...(controller.lastError === undefined ? {} : { lastError: controller.lastError }),
    refused: controller.refused(),
    pods: [...controller.applied()].sort((a, b) =>
      `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`),
    ),
    counters: counters.map((c) => ({ ...c, packets: String(c.packets), bytes: String(c.bytes) })),
  };
}
