/**
 * Cluster mode at agent start: open the store, settle this node's pod CIDRs, start the overlay and
 * the membership that follows the store. A single node (no `cluster:` section) skips all of it.
 */

import { openClusterStore } from '../cluster/config.js';
import type { PoolStore } from '../cluster/pool-store.js';
import { PodwireError } from '../cni/errors.js';
import { RoutedOverlay } from '../datapath/overlay/routed-overlay.js';
import { VxlanOverlay } from '../datapath/overlay/vxlan-overlay.js';
import { AF_INET } from '../kernel/libc.js';
import type { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import type { ClusterSettings } from './cluster-config.js';
import { ClusterNode, resolvePodCIDRs } from './cluster-node.js';
import type { AgentConfig } from './config.js';
import type { Logger } from './log.js';

/** How long a first start waits for the store to lease this node's CIDRs. */
const LEASE_WAIT_MS = 30_000;
const RT_SCOPE_UNIVERSE = 0;

export interface ClusterStart {
  podCIDRs: string[];
  /** The pod MTU once encapsulation is paid for. */
  mtu: number;
  node: ClusterNode | undefined;
  /** The store's IP pools, when it keeps any (etcd). */
  pools: PoolStore | undefined;
}

/** The uplink's index, MTU and its first global address (IPv4 preferred): the node's underlay IP. */
function uplinkOf(
  nl: Rtnetlink,
  name: string,
): { index: number; mtu: number; ip: string; mac: string | undefined } {
  const link = nl.linkByName(name);
  if (!link) throw new PodwireError('ERR_INVALID_CONFIG', `agent config: uplink: no interface ${name}`);
  const addrs = nl.addresses({ index: link.index }).filter((a) => a.scope === RT_SCOPE_UNIVERSE);
  const addr = addrs.find((a) => a.family === AF_INET) ?? addrs[0];
  if (!addr)
    throw new PodwireError('ERR_INVALID_CONFIG', `agent config: uplink: ${name} has no global address`);
  return { index: link.index, mtu: link.mtu, ip: addr.address, mac: link.mac };
}

/** `closers` gets the undo of everything opened, as in `Agent.start`. */
export async function startCluster(
  config: AgentConfig,
  nl: Rtnetlink,
  log: Logger,
  closers: Array<() => unknown>,
): Promise<ClusterStart> {
  const c: ClusterSettings | undefined = config.cluster;
  if (!c) return { podCIDRs: config.podCIDRs, mtu: config.mtu, node: undefined, pools: undefined };
  const uplink = uplinkOf(nl, c.uplink);
  const store = await openClusterStore(c.store);
  closers.push(() => store.close());
  const opts = { store, nodeName: c.nodeName, underlayIP: uplink.ip, stateDir: config.stateDir, log };
  const podCIDRs = await resolvePodCIDRs(opts, c.pool, config.podCIDRs, LEASE_WAIT_MS);
  const overlay =
    c.trafficMode === 'encap'
      ? new VxlanOverlay({
          nl,
          nodeName: c.nodeName,
          uplinkIndex: uplink.index,
          underlayIP: uplink.ip,
          uplinkMtu: uplink.mtu,
          podCIDRs,
        })
      : new RoutedOverlay({ nl, uplinkIndex: uplink.index });
  const mtu = Math.min(config.mtu, uplink.mtu - overlay.overhead);
  if (mtu < config.mtu)
    log.info('pod MTU lowered for encapsulation', { mtu, uplinkMtu: uplink.mtu, overhead: overlay.overhead });
  const { vtepMac } = await overlay.start();
  // A read-only store (the static file) must already say what this node is; its VTEP MAC is derived
  // from the node name by every peer, so the file need not carry it.
  const record = {
    name: c.nodeName,
    underlayIP: uplink.ip,
    podCIDRs,
    ...(vtepMac && store.writable ? { vtepMac } : {}),
    ...(uplink.mac && store.writable ? { uplinkMac: uplink.mac } : {}),
  };
  const node = new ClusterNode(opts, overlay, record);
  node.start();
  closers.push(() => node.stop());
  return { podCIDRs, mtu, node, pools: store.pools };
}
