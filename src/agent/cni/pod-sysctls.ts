/**
 * The pod interface's IPv6 sysctls: podwire gives a pod its addresses and routes itself, so the pod's
 * kernel must take none from a router advertisement (`accept_ra=0`, `autoconf=0`), whoever sends one
 * (issue 12). Written before the interface comes up; a pod namespace without IPv6 has nothing to set.
 */
import type { NetnsHandle } from '../../kernel/netns.js';
import { inNetns } from '../../kernel/netns.js';
import { ifaceSysctl, writeSysctl } from '../../kernel/sysctl.js';

/** Equivalent to: `ip netns exec POD sysctl -w net.ipv6.conf.IFNAME.accept_ra=0 net.ipv6.conf.IFNAME.autoconf=0`. */
export function podIgnoresRouterAdvertisements(podNs: NetnsHandle, home: NetnsHandle, ifname: string): void {
  inNetns(podNs, home, () => {
    for (const name of ['accept_ra', 'autoconf']) {
      try {
        writeSysctl(ifaceSysctl(6, ifname, name), '0');
      } catch (err) {
        // IPv6 disabled in the pod (no /proc/sys/net/ipv6): no router advertisement is read either.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      }
    }
  });
}
