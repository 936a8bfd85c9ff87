/**
 * The host veth's own IP stack takes nothing from the pod. A pod's frames cross the host veth into the
 * datapath, never into the node through it, except those the datapath hands back: the Linux bridge
 * passes a link-local frame (destination 01:80:c2:00:00:0X) up to the port itself, and OVS's userspace
 * datapath reads frames beside the kernel, which then sees each of them on the veth. On a veth without
 * addresses and with `rp_filter` off, the node would deliver such a packet to its own addresses from
 * any source the pod wrote, past the pod guards (found in review, reproduced with a spoofed UDP
 * packet to the gateway). So: strict reverse-path filtering (a pod's source is never routed back
 * through its own host veth: the datapath's gateway holds the routes), no ARP answers on it
 * (`arp_ignore=8`), and IPv6 off on it (no router advertisement, no address, no packet).
 */
import { ifaceSysctl, writeSysctl } from '../../kernel/sysctl.js';

/**
 * Equivalent to: `sysctl -w net.ipv4.conf.HOST.rp_filter=1 net.ipv4.conf.HOST.arp_ignore=8
 * net.ipv6.conf.HOST.accept_ra=0 net.ipv6.conf.HOST.disable_ipv6=1` (the IPv6 keys only where the
 * node has IPv6: a node booted with ipv6.disable=1 has no /proc/sys/net/ipv6).
 */
export function hostVethTakesNothing(hostIfname: string): void {
  writeSysctl(ifaceSysctl(4, hostIfname, 'rp_filter'), '1');
  writeSysctl(ifaceSysctl(4, hostIfname, 'arp_ignore'), '8');
  for (const name of ['accept_ra', 'disable_ipv6']) {
    try {
      writeSysctl(ifaceSysctl(6, hostIfname, name), name === 'accept_ra' ? '0' : '1');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // the node has no IPv6
      throw err;
    }
  }
}
