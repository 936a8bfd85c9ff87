/**
 * The pod side of an attachment, configured through a netlink socket that was created inside the pod
 * namespace (so no namespace switch happens here).
 */
import { PodwireError } from '../cni/errors.js';
import { AF_INET, AF_INET6 } from '../kernel/libc.js';
import type { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import type { Allocation } from '../ipam/allocator.js';

export interface PodInterface {
  index: number;
  mac: string;
}

/**
 * Equivalent to: `ip addr add IP/LEN dev IFNAME [nodad]; ip link set IFNAME up;
 * ip route add default via GW dev IFNAME` for each family.
 */
export function configurePodInterface(podNl: Rtnetlink, ifname: string, allocations: Allocation[]): PodInterface {
  const link = podNl.linkByName(ifname);
  if (!link?.mac) throw new PodwireError('ERR_INTERNAL', `pod interface ${ifname} missing right after creation`);
  for (const a of allocations) {
    podNl.addAddress(link.index, { address: a.ip, prefixLength: a.prefixLength }, { nodad: a.family === 6 });
  }
  podNl.setLinkUp(link.index);
  for (const a of allocations) {
    podNl.addRoute({ family: a.family === 4 ? AF_INET : AF_INET6, gateway: a.gateway, oif: link.index });
  }
  return { index: link.index, mac: link.mac };
}
