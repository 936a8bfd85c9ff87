/**
 * Reconcile at start (I4): the IPAM store and the host veths are compared, and whatever one has
 * without the other is removed. An allocation whose host veth is gone belonged to a pod deleted (or an
 * ADD interrupted) while the agent was down; a podwire host veth without an allocation is a leftover of
 * an interrupted DEL. Surviving pods keep their addresses and are re-attached to the datapath.
 */
import type { Attachment } from '../cni/types.js';
import type { AgentContext } from './context.js';
import { attachmentKey, HOST_VETH_PREFIX, hostVethName } from './host-veth.js';

export interface ReconcileReport {
  kept: number;
  released: Attachment[];
  vethsRemoved: string[];
}

export async function reconcile(ctx: AgentContext): Promise<ReconcileReport> {
  const report: ReconcileReport = { kept: 0, released: [], vethsRemoved: [] };
  const veths = new Map(
    ctx.nl
      .links()
      .filter((l) => l.kind === 'veth' && l.name.startsWith(HOST_VETH_PREFIX))
      .map((l) => [l.name, l]),
  );
  const explained = new Set<string>();
  const owners = new Map<string, Attachment>();
  for (const a of await ctx.ipam.list()) owners.set(attachmentKey(a.containerId, a.ifname), a);

  for (const att of owners.values()) {
    const name = hostVethName(att.containerId, att.ifname);
    const link = veths.get(name);
    if (!link) {
      await ctx.datapath.detachPort(name);
      await ctx.ipam.release(att);
      report.released.push({ containerId: att.containerId, ifname: att.ifname });
      continue;
    }
    explained.add(name);
    report.kept++;
    // The bridge may have been recreated; re-attaching an attached port changes nothing.
    await ctx.datapath.attachPort({
      hostIfname: name,
      hostIfindex: link.index,
      containerId: att.containerId,
      ifname: att.ifname,
      podMac: '',
      podIps: [],
    });
  }
  for (const name of veths.keys()) {
    if (explained.has(name)) continue;
    await ctx.datapath.detachPort(name);
    if (ctx.nl.deleteLinkByName(name)) report.vethsRemoved.push(name);
  }
  // Pod ports whose veth and allocation are both gone (an OVS port outlives its veth as an OVSDB row).
  // Only podwire's own names: a bridge may have other ports (an uplink) that are none of ours.
  for (const name of await ctx.datapath.ports()) {
    if (name.startsWith(HOST_VETH_PREFIX) && !explained.has(name)) await ctx.datapath.detachPort(name);
  }
  ctx.log.info('reconciled', {
    kept: report.kept,
    released: report.released.length,
    vethsRemoved: report.vethsRemoved,
  });
  return report;
}
