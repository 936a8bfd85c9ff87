/**
 * CNI GC (1.1.0) of one network: removes every attachment of that network that is not in
 * `cni.dev/valid-attachments`: its addresses, datapath port and host veth. SPEC.md 1.1.0 names an
 * attachment by (network name, containerID, ifname), and the list only covers the network GC is
 * called for, so GC touches only what is recorded as that network's:
 *
 * - claims recorded with the network's name (store.ts, `AllocationRecord.network`); claims of other
 *   networks, and legacy claims that name none, are left alone (reconcile releases a legacy claim
 *   once its veth is gone; a passing CHECK gives it its network's name);
 * - podwire host veths no claim explains, when their alias names the network (host-veth.ts): the
 *   leftovers of an interrupted DEL of this network. A veth without such an alias is left to
 *   reconcile (`podwire gc`, agent start), which removes it whatever its network.
 *
 * Datapath ports are detached only for the attachments removed here. A claim the store cannot read
 * (store.ts, `UnreadableClaim`) belongs to no network GC could judge: it is left alone, and while there
 * is one no claimless veth is removed (it may be that claim's pod), as in reconcile.
 *
 * What GC removes is what it listed (issue 15, finding 9): a claim is released only while the
 * attachment still holds exactly the claims listed (a DEL and a new ADD of the same pair since then
 * made a new attachment, which the runtime's list did not judge), and a veth is deleted by the index
 * it was listed with, only while no claim explains its name in a listing taken after the releases
 * (an ADD that completed meanwhile holds a new veth of the same name, or the old one).
 */
import type { Attachment } from '../../cni/types.js';
import { removePodIfb } from '../../datapath/pod-bandwidth.js';
import type { OwnedAllocation } from '../../ipam/allocator.js';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import { cmdDel } from './cmd-del.js';
import { attachmentKey, HOST_VETH_PREFIX, hostVethName, hostVethOfKey, networkOfAlias } from './host-veth.js';
import type { ReconcileGuard } from './reconcile.js';

export interface GcReport {
  released: Attachment[];
  vethsRemoved: string[];
  /** Attachments of this network's valid list or of other networks, kept. */
  kept: number;
  /** Attachments whose claims name no network (legacy claims), kept. */
  legacy: Attachment[];
  /** Claims the store could not read: left alone (taken, owner unknown). */
  unreadable: number;
}

/**
 * `guard.serial` runs a step on an attachment's key (the scheduler's run) and `guard.busy` names the
 * keys with calls in flight, so GC never cuts into a call (an ADD holds its veth before it answers).
 */
export async function cmdGc(
  ctx: AgentContext,
  network: string,
  valid: Attachment[],
  log: Logger,
  guard: ReconcileGuard,
): Promise<GcReport> {
  const keep = new Set(valid.map((a) => attachmentKey(a.containerId, a.ifname)));
  const report: GcReport = { released: [], vethsRemoved: [], kept: 0, legacy: [], unreadable: 0 };
  // Links before claims: ADD claims before it creates its veth, so a veth in this snapshot whose
  // claim is in no later listing has lost it to a DEL (and is its leftover), never gained it since.
  const links = ctx.nl.links();
  const claims = new Map<string, OwnedAllocation[]>();
  for (const a of await ctx.ipam.list()) {
    const key = attachmentKey(a.containerId, a.ifname);
    claims.set(key, [...(claims.get(key) ?? []), a]);
  }
  /** Host veths that some claim explains, of whatever network: never judged by their alias. */
  const claimedVeths = new Set<string>();
  for (const [key, held] of claims) {
    const att = { containerId: held[0]?.containerId ?? '', ifname: held[0]?.ifname ?? '' };
    claimedVeths.add(hostVethName(att.containerId, att.ifname));
    const named = held.find((a) => a.network !== undefined)?.network;
    if (named === undefined) {
      report.legacy.push(att);
      continue;
    }
    if (named !== network || keep.has(key)) {
      report.kept++;
      continue;
    }
    // On the attachment's key, and only while it holds the very claims listed: a DEL and then an ADD
    // of the same pair (of this network or another) since the listing made an attachment the
    // runtime's list never judged.
    const listed = claimsIdentity(held);
    const released = await guard.serial(key, async () => {
      if (claimsIdentity(ctx.ipam.owned(att)) !== listed) return false;
      return cmdDel(ctx, att, network, log);
    });
    if (released) report.released.push(att);
  }
  const keepVeths = new Set(valid.map((a) => hostVethName(a.containerId, a.ifname)));
  const unexplained = links.filter(
    (link) =>
      link.kind === 'veth' &&
      link.name.startsWith(HOST_VETH_PREFIX) &&
      !claimedVeths.has(link.name) &&
      !keepVeths.has(link.name) &&
      networkOfAlias(link.alias) === network,
  );
  // Claims made since the first listing (ADDs that ran during the releases) explain their veths too.
  if (unexplained.length > 0) {
    for (const a of await ctx.ipam.list()) claimedVeths.add(hostVethName(a.containerId, a.ifname));
  }
  // As of the listings above: while a claim cannot be read, a claimless veth may be its pod's.
  report.unreadable = ctx.ipam.unreadable().length;
  for (const link of unexplained) {
    const name = link.name;
    if (claimedVeths.has(name) || new Set([...guard.busy()].map(hostVethOfKey)).has(name)) continue;
    if (report.unreadable > 0) continue;
    // The link listed, not one that took its name since (a DEL's deletion, then an ADD of the pair).
    if (ctx.nl.linkByName(name)?.index !== link.index) continue;
    await ctx.datapath.detachPort(name);
    if (await ctx.nl.deleteLinkAsync(link.index)) report.vethsRemoved.push(name);
    // Its own IFB (an egress rate, pod-bandwidth.ts) goes with it.
    removePodIfb(ctx.nl, name);
  }
  log.info('gc done', {
    network,
    released: report.released.length,
    vethsRemoved: report.vethsRemoved,
    kept: report.kept,
    legacy: report.legacy.length,
    unreadable: report.unreadable,
  });
  return report;
}

/** What makes a claim this one and not a later one of the same attachment: range, address, time, network. */
function claimsIdentity(held: readonly OwnedAllocation[]): string {
  return held
    .map((a) => JSON.stringify([a.rangeId, a.ip, a.createdAt, a.network ?? null]))
    .sort()
    .join('\n');
}
