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
 *
 * The attachment is (network, containerID, ifname) (SPEC.md 1.1.0): a DEL whose network name differs
 * from the one recorded with the attachment's claims (or, without claims, on its host veth) is a DEL
 * of an attachment that does not exist, and succeeds without touching anything. A legacy attachment
 * (nothing recorded) is deleted by a DEL of any network, as before names were recorded.
 */
import type { Attachment } from '../../cni/types.js';
import { removePodIfb } from '../../datapath/pod-bandwidth.js';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import { attachmentKey, hostVethName, networkOfAlias } from './host-veth.js';
import { podDetached } from './local-pods.js';
import { StepTimer } from './step-timer.js';

/** Resolves false when the attachment is another network's and nothing was deleted. */
export async function cmdDel(
  ctx: AgentContext,
  att: Attachment,
  network: string,
  log: Logger,
  answer: () => void = () => {},
): Promise<boolean> {
  const t = new StepTimer();
  const hostName = hostVethName(att.containerId, att.ifname);
  const recorded = recordedNetwork(ctx, att, hostName);
  if (recorded !== undefined && recorded !== network) {
    log.warn('DEL of another network than the attachment was added for: nothing deleted', {
      network,
      recorded,
      hostVeth: hostName,
    });
    answer();
    return false;
  }
  await ctx.announcer.cancel(attachmentKey(att.containerId, att.ifname));
  t.mark('announcer');
  await ctx.datapath.isolatePort(hostName);
  t.mark('datapath');
  const released = await ctx.ipam.release(att);
  podDetached(ctx, att);
  t.mark('ipam');
  answer();
  let removedVeth: boolean;
  try {
    removedVeth = await ctx.nl.deleteLinkByNameAsync(hostName);
    // The pod's own IFB (an egress rate, pod-bandwidth.ts), after the veth that redirects to it.
    removePodIfb(ctx.nl, hostName);
  } catch (err) {
    log.error('veth or pod IFB deletion failed after DEL answered; reconcile will remove it', {
      hostVeth: hostName,
      err: String(err),
    });
    return true;
  }
  t.mark('veth');
  log.info('attachment deleted', {
    hostVeth: hostName,
    removedVeth,
    released: released.map((a) => a.ip),
    steps: t.steps,
  });
  return true;
}

/** The network the attachment's claims name, else its host veth's alias; undefined when neither does. */
export function recordedNetwork(ctx: AgentContext, att: Attachment, hostName: string): string | undefined {
  const claimed = ctx.ipam.owned(att).find((a) => a.network !== undefined)?.network;
  if (claimed !== undefined) return claimed;
  if (ctx.ipam.owned(att).length > 0) return undefined; // legacy claims: the alias is not consulted
  return networkOfAlias(ctx.nl.linkByName(hostName)?.alias);
}
