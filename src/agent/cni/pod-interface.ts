/**
 * The pod side of an attachment, configured through a netlink socket that was created inside the pod
 * namespace (so no namespace switch happens here).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DatapathError, InternalError, InvalidConfigError } from '../../base/errors.js';
import { cidrFamily } from '../../base/ip.js';
import type { CniRoute } from '../../cni/types.js';
import type { Allocation } from '../../ipam/allocator.js';
import { AF_INET, AF_INET6, KernelError } from '../../kernel/libc.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { podRoutes } from './pod-routes.js';

export interface PodInterface {
  index: number;
  mac: string;
}

/**
 * Equivalent to: `ip addr add IP/LEN dev IFNAME [nodad]` for each address; `ip link set IFNAME up`;
 * `ip route add DST via GW dev IFNAME` for each route (pod-routes.ts: the default routes, unless the
 * network has `defaultRoute: false`, and the network's `routes`); without `routes`, the default
 * route of each family.
 */
export function configurePodInterface(
  podNl: Rtnetlink,
  ifname: string,
  allocations: Allocation[],
  routes: readonly CniRoute[] = podRoutes({}, allocations),
): PodInterface {
  const link = podNl.linkByName(ifname);
  if (!link?.mac) throw new InternalError(`pod interface ${ifname} missing right after creation`);
  for (const a of allocations) {
    podNl.addAddress(link.index, { address: a.ip, prefixLength: a.prefixLength }, { nodad: a.family === 6 });
  }
  podNl.setLinkUp(link.index);
  for (const r of routes) {
    const family = cidrFamily(r.dst) === 6 ? AF_INET6 : AF_INET;
    try {
      podNl.addRoute({
        family,
        dst: r.dst,
        ...(r.gw === undefined ? {} : { gateway: r.gw }),
        oif: link.index,
      });
    } catch (err) {
      // The network's configuration, not the node, is at fault: say which route (CNI error 7).
      if (err instanceof KernelError && err.errno === ENETUNREACH && r.gw !== undefined) {
        throw new InvalidConfigError(
          `routes: gw ${r.gw} of the route to ${r.dst} is not reachable from the pod's addresses (${allocations.map((a) => `${a.ip}/${a.prefixLength}`).join(', ')})`,
          { cause: err },
        );
      }
      throw err;
    }
  }
  return { index: link.index, mac: link.mac };
}

const ENETUNREACH = 101;

/** A veth pair's carrier comes on within milliseconds of both ends being up. */
const TRANSMIT_TIMEOUT_MS = 2000;

/**
 * Waits until the pod interface transmits. When a veth's carrier comes on, the kernel's linkwatch
 * work sets its operstate and only then activates its transmit queue; until then the queue is the
 * "noop" qdisc, which drops every frame sent (a gratuitous ARP first of all). Operstate UP is the
 * first sign visible over rtnetlink that the queue is active.
 */
export async function waitCanTransmit(podNl: Rtnetlink, ifname: string, index: number): Promise<void> {
  const deadline = performance.now() + TRANSMIT_TIMEOUT_MS;
  for (let delay = 1; ; delay = Math.min(delay * 2, 20)) {
    const state = podNl.linkByIndex(index)?.operstate;
    if (state === 'UP') return;
    if (performance.now() > deadline) {
      throw new DatapathError(
        `pod interface ${ifname} not up after ${TRANSMIT_TIMEOUT_MS} ms (operstate ${state})`,
      );
    }
    await sleep(delay);
  }
}
