/**
 * CNI DEL: undoes ADD in reverse order (announcements, datapath port, veth down, then the veth and
 * the IPAM claim together). Needs no netns:
 * deleting the host end removes the pod end with it, and the address is released even when the
 * namespace is long gone. Succeeds when any part is already gone.
 */
import type { Attachment } from '../cni/types.js';
import type { AgentContext } from './context.js';
import { attachmentKey, hostVethName } from './host-veth.js';
import type { Logger } from './log.js';
import { StepTimer } from './step-timer.js';

export async function cmdDel(ctx: AgentContext, att: Attachment, log: Logger): Promise<void> {
  const t = new StepTimer();
  const hostName = hostVethName(att.containerId, att.ifname);
  await ctx.announcer.cancel(attachmentKey(att.containerId, att.ifname));
  t.mark('announcer');
  if (!ctx.datapath.linkDeletionDetaches) await ctx.datapath.detachPort(hostName);
  t.mark('datapath');
  // Once the host end is down the pod can neither send nor receive, so its address may go to another
  // pod while the kernel takes its time (~20 ms of RCU waits) to unregister the veth.
  const link = ctx.nl.linkByName(hostName);
  if (link) ctx.nl.setLinkDown(link.index);
  const [removedVeth, released] = await Promise.all([
    ctx.nl.deleteLinkByNameAsync(hostName),
    ctx.ipam.release(att),
  ]);
  t.mark('veth+ipam');
  log.info('attachment deleted', {
    hostVeth: hostName,
    removedVeth,
    released: released.map((a) => a.ip),
    steps: t.steps,
  });
}
