/**
 * CNI DEL: undoes ADD in reverse order: announcements, the datapath port (isolated at once), the
 * IPAM claim, then the veth. Needs no netns: deleting the host end removes the pod end with it, and
 * the address is released even when the namespace is long gone. Succeeds when any part is already
 * gone.
 *
 * The answer goes back as soon as the pod is cut off and its address released (`answer`); the
 * kernel's ~20 ms of RCU waits to unregister the veth run after it, still on the attachment's key, so
 * a later call on the same attachment waits for them. A deletion that fails then is logged; reconcile
 * at start and `podwire gc` remove the veth (it has no claim any more).
 */
import type { Attachment } from '../../cni/types.js';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import { attachmentKey, hostVethName } from './host-veth.js';
import { StepTimer } from './step-timer.js';

export async function cmdDel(
  ctx: AgentContext,
  att: Attachment,
  log: Logger,
  answer: () => void = () => {},
): Promise<void> {
  const t = new StepTimer();
  const hostName = hostVethName(att.containerId, att.ifname);
  await ctx.announcer.cancel(attachmentKey(att.containerId, att.ifname));
  t.mark('announcer');
  await ctx.datapath.isolatePort(hostName);
  t.mark('datapath');
  const released = await ctx.ipam.release(att);
  t.mark('ipam');
  answer();
  let removedVeth: boolean;
  try {
    removedVeth = await ctx.nl.deleteLinkByNameAsync(hostName);
  } catch (err) {
    log.error('veth deletion failed after DEL answered; reconcile will remove it', {
      hostVeth: hostName,
      err: String(err),
    });
    return;
  }
  t.mark('veth');
  log.info('attachment deleted', {
    hostVeth: hostName,
    removedVeth,
    released: released.map((a) => a.ip),
    steps: t.steps,
  });
}
