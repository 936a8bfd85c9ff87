/**
 * The gateway interface both datapaths share the rules of: a Linux bridge, or OVS's internal port.
 * It holds the first address of each pod CIDR and must never speak ARP for any other address.
 */
import type { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import { ifaceSysctl, type SysctlWriter } from '../kernel/sysctl.js';
import type { GatewayAddress } from './datapath.js';

/**
 * Equivalent to: `ip addr add GW/LEN dev IFNAME [nodad]` for each missing address, the sysctls below,
 * `ip link set IFNAME up`. Idempotent: safe at every start, with pods running.
 */
export function configureGateway(
  nl: Rtnetlink,
  sysctl: SysctlWriter,
  link: { index: number; name: string },
  gateways: readonly GatewayAddress[],
): void {
  const present = new Set(nl.addresses({ index: link.index }).map((a) => `${a.address}/${a.prefixLength}`));
  for (const gw of gateways) {
    if (present.has(`${gw.address}/${gw.prefixLength}`)) continue;
    nl.addAddress(
      link.index,
      { address: gw.address, prefixLength: gw.prefixLength },
      { nodad: gw.family === 6 },
    );
  }
  // Never answer or ask with an address that is not on the gateway's own subnet (docs/architecture.md, failure 2).
  sysctl(ifaceSysctl(4, link.name, 'arp_announce'), '1');
  sysctl('net/ipv4/ip_forward', '1');
  if (gateways.some((g) => g.family === 6)) {
    sysctl(ifaceSysctl(6, link.name, 'accept_ra'), '0');
    sysctl('net/ipv6/conf/all/forwarding', '1');
  }
  nl.setLinkUp(link.index);
}
