/**
 * The underlay addresses of the cluster's nodes. No pod may hold one: a pool address that is a
 * node's would let the datapaths' guards pass that pod's frames as the node's (failure 2 by a
 * legitimate claim), so pools never hand one out and `podwire pool create` refuses a pool that
 * covers one (issue 15, finding 3).
 */
import { normalizeIp } from '../base/ip.js';
import type { ClusterStore } from './store.js';

/** Every registered node's underlay address (canonical text) and the node's name. */
export async function nodeAddressesOf(store: ClusterStore): Promise<ReadonlyMap<string, string>> {
  const { nodes } = await store.listNodes();
  const out = new Map<string, string>();
  for (const { node } of nodes) {
    const ip = normalizeIp(node.underlayIP);
    if (ip !== undefined) out.set(ip, node.name);
  }
  return out;
}
