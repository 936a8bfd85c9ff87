/**
 * CNI DEL: undoes ADD in reverse order (announcements, datapath port, veth, IPAM). Needs no netns:
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
  // The veth first, on a worker thread (the kernel waits ~20 ms for RCU; the main thread stays free):
  // only once it is gone may the address go to another pod.
  const removedVeth = await ctx.nl.deleteLinkByNameAsync(hostName);
  t.mark('veth');
  const released = await ctx.ipam.release(att);
  t.mark('ipam');
  log.info('attachment deleted', {
    hostVeth: hostName,
    removedVeth,
    released: released.map((a) => a.ip),
    steps: t.steps,
  });
}
