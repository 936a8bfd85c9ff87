/**
 * CNI GC (1.1.0): removes every attachment that is not in `cni.dev/valid-attachments`: its host veth
 * and its addresses. Also removes podwire host veths that no allocation explains.
 */
import type { Attachment } from '../../cni/types.js';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import { cmdDel } from './cmd-del.js';
import { attachmentKey, HOST_VETH_PREFIX, hostVethName, hostVethOfKey } from './host-veth.js';
import type { ReconcileGuard } from './reconcile.js';

export interface GcReport {
  released: Attachment[];
  vethsRemoved: string[];
}

/**
 * `guard.serial` runs a step on an attachment's key (the scheduler's run) and `guard.busy` names the
 * keys with calls in flight, so GC never cuts into a call (an ADD holds its veth before it answers).
 */
export async function cmdGc(
  ctx: AgentContext,
  valid: Attachment[],
  log: Logger,
  guard: ReconcileGuard,
): Promise<GcReport> {
  const keep = new Set(valid.map((a) => attachmentKey(a.containerId, a.ifname)));
  const keepVeths = new Set(valid.map((a) => hostVethName(a.containerId, a.ifname)));
  const report: GcReport = { released: [], vethsRemoved: [] };
  const owners = new Map<string, Attachment>();
  for (const a of await ctx.ipam.list()) owners.set(attachmentKey(a.containerId, a.ifname), a);
  for (const [key, att] of owners) {
    if (keep.has(key)) continue;
    await guard.serial(key, () => cmdDel(ctx, att, log));
    report.released.push({ containerId: att.containerId, ifname: att.ifname });
  }
  const busyVeths = new Set([...guard.busy()].map(hostVethOfKey));
  for (const link of ctx.nl.links()) {
    const name = link.name;
    if (
      link.kind !== 'veth' ||
      !name.startsWith(HOST_VETH_PREFIX) ||
      keepVeths.has(name) ||
      busyVeths.has(name)
    ) {
      continue;
    }
    await ctx.datapath.detachPort(name);
    if (await ctx.nl.deleteLinkByNameAsync(name)) report.vethsRemoved.push(name);
  }
  log.info('gc done', { released: report.released.length, vethsRemoved: report.vethsRemoved });
  return report;
}
