/**
 * Cluster mode at agent start: open the store, settle this node's pod CIDRs, start the overlay and
 * the membership that follows the store. A single node (no `cluster:` section) skips all of it.
 */

import { openClusterStore } from '../cluster/config.js';
import type { PoolStore } from '../cluster/pool-store.js';
import { PodwireError } from '../cni/errors.js';
import { RoutedOverlay } from '../datapath/overlay/routed-overlay.js';
import { VxlanOverlay, vxlanOverhead } from '../datapath/overlay/vxlan-overlay.js';
import { AF_INET } from '../kernel/libc.js';
import type { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import { savedUplinkIp } from './bridging.js';
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
  stateDir: string,
): { index: number; mtu: number; ip: string; mac: string | undefined } {
  const link = nl.linkByName(name);
  if (!link) throw new PodwireError('ERR_INVALID_CONFIG', `agent config: uplink: no interface ${name}`);
  const addrs = nl.addresses({ index: link.index }).filter((a) => a.scope === RT_SCOPE_UNIVERSE);
  const addr = addrs.find((a) => a.family === AF_INET) ?? addrs[0];
  // Bridging mode, after a run that was killed with the uplink moved: bridging restores it shortly.
  const saved = addr ? undefined : savedUplinkIp(stateDir, name);
  if (saved) return { index: link.index, mtu: link.mtu, ip: saved, mac: link.mac };
  if (!addr)
    throw new PodwireError('ERR_INVALID_CONFIG', `agent config: uplink: ${name} has no global address`);
  return { index: link.index, mtu: link.mtu, ip: addr.address, mac: link.mac };
}

/**
 * Brings up the node side once the pod CIDRs and MTU are known (the datapath and, in bridging mode,
 * the uplink moved into it); returns the index of the interface that then holds the underlay IP when
 * it is no longer the uplink.
 */
export type NodeSideStart = (podCIDRs: string[], mtu: number) => Promise<number | undefined>;

/** `closers` gets the undo of everything opened, as in `Agent.start`. */
export async function startCluster(
  config: AgentConfig,
  nl: Rtnetlink,
  log: Logger,
  closers: Array<() => unknown>,
  nodeSide: NodeSideStart,
): Promise<ClusterStart> {
  const c: ClusterSettings | undefined = config.cluster;
  if (!c) return { podCIDRs: config.podCIDRs, mtu: config.mtu, node: undefined, pools: undefined };
  const uplink = uplinkOf(nl, c.uplink, config.stateDir);
  const store = await openClusterStore(c.store);
  closers.push(() => store.close());
  const opts = { store, nodeName: c.nodeName, underlayIP: uplink.ip, stateDir: config.stateDir, log };
  const podCIDRs = await resolvePodCIDRs(opts, c.pool, config.podCIDRs, LEASE_WAIT_MS);
  const overhead = c.trafficMode === 'encap' ? vxlanOverhead(uplink.ip) : 0;
  const mtu = Math.min(config.mtu, uplink.mtu - overhead);
  if (mtu < config.mtu)
    log.info('pod MTU lowered for encapsulation', { mtu, uplinkMtu: uplink.mtu, overhead });
  // In bridging mode the underlay IP now lives on the bridge interface: the overlay sends through it.
  const underlayIndex = (await nodeSide(podCIDRs, mtu)) ?? uplink.index;
  const overlay =
    c.trafficMode === 'encap'
      ? new VxlanOverlay({
          nl,
          nodeName: c.nodeName,
          uplinkIndex: underlayIndex,
          underlayIP: uplink.ip,
          uplinkMtu: uplink.mtu,
          podCIDRs,
        })
      : new RoutedOverlay({ nl, uplinkIndex: underlayIndex, podCIDRs });
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
