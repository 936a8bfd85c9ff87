/**
 * Reconcile at start (I4): the IPAM store and the host veths are compared, and whatever one has
 * without the other is removed. An allocation whose host veth is gone belonged to a pod deleted (or an
 * ADD interrupted) while the agent was down; a podwire host veth without an allocation is a leftover of
 * an interrupted DEL. Surviving pods keep their addresses and are re-attached to the datapath.
 *
 * A claim the store cannot read (store.ts, `UnreadableClaim`) is neither released nor judged: its owner
 * is unknown, and the address may be in use. While there is one, no claimless veth is removed either,
 * since it may be that claim's pod; the log says so, and an operator removes the file (docs/architecture.md, Operating it).
 */

import { podMac } from '../../base/pod-mac.js';
import type { Attachment } from '../../cni/types.js';
import { hostVethOfPodIfb, POD_IFB_PREFIX } from '../../datapath/pod-bandwidth.js';
import type { AgentContext } from '../context.js';
import { attachmentKey, HOST_VETH_PREFIX, hostVethName, hostVethOfKey } from './host-veth.js';

export interface ReconcileReport {
  kept: number;
  released: Attachment[];
  vethsRemoved: string[];
  /** Claims the store could not read: left alone (taken, owner unknown). */
  unreadable: number;
  /** Claimless veths kept because an unreadable claim may be theirs. */
  vethsKept: string[];
  /** Pods' own IFBs (an egress rate, pod-bandwidth.ts) whose host veth is gone. */
  ifbsRemoved: string[];
}

/**
 * How reconcile runs beside CNI calls (`podwire gc` while the agent serves): `serial` runs a step on
 * an attachment's key in the scheduler, and `busy` names the keys with calls in flight, whose veths
 * and claims reconcile must not judge (an ADD holds its claim before its veth exists). At start
 * nothing runs beside it, and both are trivial.
 */
export interface ReconcileGuard {
  serial<T>(key: string, fn: () => Promise<T>): Promise<T>;
  busy(): ReadonlySet<string>;
}

const ALONE: ReconcileGuard = { serial: (_key, fn) => fn(), busy: () => new Set() };

export async function reconcile(ctx: AgentContext, guard: ReconcileGuard = ALONE): Promise<ReconcileReport> {
  const report: ReconcileReport = {
    kept: 0,
    released: [],
    vethsRemoved: [],
    unreadable: 0,
    vethsKept: [],
    ifbsRemoved: [],
  };
  const busy = guard.busy();
  const veths = new Map(
    ctx.nl
      .links()
      .filter((l) => l.kind === 'veth' && l.name.startsWith(HOST_VETH_PREFIX))
      .map((l) => [l.name, l]),
  );
  const explained = new Set<string>();
  const owners = new Map<string, Attachment>();
  for (const a of await ctx.ipam.list()) owners.set(attachmentKey(a.containerId, a.ifname), a);

  for (const [key, att] of owners) {
    const name = hostVethName(att.containerId, att.ifname);
    if (busy.has(key)) {
      explained.add(name); // a call is in flight on it: its state is that call's business
      continue;
    }
    const link = veths.get(name);
    if (!link) {
      // Judged again on the attachment's key: a call may have started since the listing.
      const released = await guard.serial(key, async () => {
        if (ctx.nl.linkByName(name)) return false;
        await ctx.datapath.detachPort(name);
        return (await ctx.ipam.release(att)).length > 0;
      });
      if (released) report.released.push({ containerId: att.containerId, ifname: att.ifname });
      else explained.add(name);
      continue;
    }
    explained.add(name);
    report.kept++;
    // The bridge may have been recreated; re-attaching an attached port changes nothing. On the
    // attachment's key (a DEL may have started since the listing). An empty MAC asks the datapath to
    // use what it recorded (OVS keeps the pod's flows as they are: reinstalling them would drop
    // packets); `podIps` are what the claims say now, not at the listing: a DEL and an ADD of the
    // same attachment since then gave it other addresses, and the guards must follow those.
    try {
      await guard.serial(key, async () => {
        const now = ctx.nl.linkByName(name);
        const ips = ctx.ipam.lookup(att).map((a) => a.ip);
        if (!now || ips.length === 0) return;
        const port = {
          hostIfname: name,
          hostIfindex: now.index,
          containerId: att.containerId,
          ifname: att.ifname,
        };
        try {
          await ctx.datapath.attachPort({ ...port, podMac: '', podIps: ips });
        } catch (err) {
          // Nothing recorded (e.g. OVSDB was reset). A pool pod's VLAN is not in its claims: attached
          // afresh it would land untagged, in the node's own L2. It stays detached, and says so.
          const pools = ctx.ipam.lookup(att).filter((a) => a.rangeId.startsWith('pool/'));
          if (pools.length > 0) {
            ctx.log.error('not re-attaching a pool pod the datapath has no record of: its VLAN is unknown', {
              hostVeth: name,
              ranges: pools.map((a) => a.rangeId),
              err: String(err),
            });
            return;
          }
          // Otherwise attach afresh from the claims, whose MAC follows the address (pod-mac.ts).
          ctx.log.warn('re-attaching from the IPAM claims', { hostVeth: name, err: String(err) });
          await ctx.datapath.attachPort({ ...port, podMac: podMac(ips), podIps: ips });
        }
      });
    } catch (err) {
      ctx.log.error('re-attaching a pod at reconcile failed', { hostVeth: name, err: String(err) });
    }
  }
  const busyVeths = new Set([...busy].map(hostVethOfKey));
  const unexplained = [...veths.values()].filter((l) => !explained.has(l.name) && !busyVeths.has(l.name));
  // Claims made since the listing (calls that ran during the re-attachments) explain their veths too,
  // and a veth is deleted by the index it was listed with, never a newer one of the same name (issue
  // 15, finding 9).
  const claimedNow = new Set<string>();
  if (unexplained.length > 0) {
    for (const a of await ctx.ipam.list()) claimedNow.add(hostVethName(a.containerId, a.ifname));
  }
  // The listings above also read the unreadable claims: while there is one, a claimless veth may be
  // its pod's, and stays.
  const unreadable = ctx.ipam.unreadable();
  report.unreadable = unreadable.length;
  for (const link of unexplained) {
    const name = link.name;
    if (claimedNow.has(name) || new Set([...guard.busy()].map(hostVethOfKey)).has(name)) {
      explained.add(name);
      continue;
    }
    if (unreadable.length > 0) {
      explained.add(name);
      report.vethsKept.push(name);
      continue;
    }
    if (ctx.nl.linkByName(name)?.index !== link.index) {
      explained.add(name); // a new veth of that name: its call's business
      continue;
    }
    await ctx.datapath.detachPort(name);
    if (await ctx.nl.deleteLinkAsync(link.index)) report.vethsRemoved.push(name);
  }
  // Pod ports whose veth and allocation are both gone (an OVS port outlives its veth as an OVSDB row).
  // Only podwire's own names: a bridge may have other ports (an uplink) that are none of ours. Judged
  // as they are now, not as listed: an ADD since the listing has a claim, a veth and a port that no
  // listing above saw, and must keep them.
  const orphans = (await ctx.datapath.ports()).filter(
    (name) => name.startsWith(HOST_VETH_PREFIX) && !explained.has(name) && !busyVeths.has(name),
  );
  if (orphans.length > 0) {
    const claimed = new Set((await ctx.ipam.list()).map((a) => hostVethName(a.containerId, a.ifname)));
    for (const name of orphans) {
      if (claimed.has(name) || ctx.nl.linkByName(name)) continue;
      if (new Set([...guard.busy()].map(hostVethOfKey)).has(name)) continue;
      await ctx.datapath.detachPort(name);
    }
  }
  // A pod's own IFB outlives its veth (an agent stopped between the two deletions of DEL, or an ADD
  // interrupted): one whose host veth is gone is removed, unless a call is in flight on that veth.
  for (const link of ctx.nl.links()) {
    if (link.kind !== 'ifb' || !link.name.startsWith(POD_IFB_PREFIX) || link.name.length !== 15) continue;
    const veth = hostVethOfPodIfb(link.name, HOST_VETH_PREFIX);
    if (new Set([...guard.busy()].map(hostVethOfKey)).has(veth) || ctx.nl.linkByName(veth)) continue;
    if (ctx.nl.linkByName(link.name)?.index !== link.index) continue;
    await ctx.nl.deleteLinkAsync(link.index);
    report.ifbsRemoved.push(link.name);
  }
  // The egress masquerade table, when something removed it (decision 20).
  await ctx.egress?.ensure();
  if (unreadable.length > 0) {
    ctx.log.warn('reconcile left unreadable IPAM claims alone (taken, owner unknown)', {
      claims: unreadable.map((c) => ({ range: c.rangeId, ip: c.ip, file: c.where, reason: c.reason })),
      vethsKept: report.vethsKept,
    });
  }
  ctx.log.info('reconciled', {
    kept: report.kept,
    released: report.released.length,
    vethsRemoved: report.vethsRemoved,
    ifbsRemoved: report.ifbsRemoved,
    unreadable: report.unreadable,
  });
  return report;
}
