/**
 * The routes of a pod interface, from the network's configuration (`defaultRoute`, `routes`; see
 * cni/types.ts) and the addresses IPAM gave it. ADD adds them and reports them, CHECK looks for them:
 * one list, so the two never disagree.
 */
import { InvalidConfigError } from '../../base/errors.js';
import { cidrFamily } from '../../base/ip.js';
import type { CniRoute, NetConf } from '../../cni/types.js';
import type { Allocation } from '../../ipam/allocator.js';

export type RouteConf = Pick<NetConf, 'defaultRoute' | 'routes'>;

/** A default route's destination as results and `ip route` spell it. */
export function defaultDst(family: 4 | 6): string {
  return family === 4 ? '0.0.0.0/0' : '::/0';
}

/**
 * A default route per family via the pod's gateway unless `defaultRoute` is false, then each
 * configured route via its `gw` or the pod's gateway of its family. ERR_INVALID_CONFIG when a route's
 * family is one the pod has no address of (it would have no gateway, and no source address).
 */
export function podRoutes(conf: RouteConf, allocations: readonly Allocation[]): CniRoute[] {
  const out: CniRoute[] = [];
  if (conf.defaultRoute !== false) {
    for (const a of allocations) out.push({ dst: defaultDst(a.family), gw: a.gateway });
  }
  for (const [i, r] of (conf.routes ?? []).entries()) {
    const family = cidrFamily(r.dst);
    const via = allocations.find((a) => a.family === family);
    if (via === undefined) {
      throw new InvalidConfigError(
        `routes[${i}].dst: ${r.dst} is IPv${family} but the pod has no IPv${family} address on this network`,
      );
    }
    out.push({ dst: r.dst, gw: r.gw ?? via.gateway });
  }
  return out;
}
