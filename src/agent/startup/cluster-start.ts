/**
 * Cluster mode at agent start: open the store, settle this node's pod CIDRs, start the overlay and
 * the membership that follows the store. A single node (no `cluster:` section) skips all of it.
 */

import { InvalidConfigError } from '../../base/errors.js';
import { insecureEndpoints, openClusterStore } from '../../cluster/config.js';
import type { PoolStore } from '../../cluster/pool-store.js';
import type { ClusterStore, NodeRecord } from '../../cluster/store.js';
import { RoutedOverlay } from '../../datapath/overlay/routed-overlay.js';
import { removeVxlanGuard, VxlanGuard } from '../../datapath/overlay/vxlan-guard.js';
import { VXLAN_PORT, VxlanOverlay, vxlanOverhead } from '../../datapath/overlay/vxlan-overlay.js';
import { AF_INET } from '../../kernel/libc.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { nftIn } from '../../kernel/nft.js';
import type { ClusterSettings } from '../cluster-config.js';
import type { AgentConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { UndoStack } from '../undo-stack.js';
import { savedUplinkIp } from './bridging.js';
import { ClusterNode, resolvePodCIDRs } from './cluster-node.js';
import type { EgressControl } from './egress-start.js';

/** How long a first start waits for the store to lease this node's CIDRs. */
const LEASE_WAIT_MS = 30_000;
const RT_SCOPE_UNIVERSE = 0;

/** The uplink's index, MTU and its first global address (IPv4 preferred): the node's underlay IP. */
function uplinkOf(
  nl: Rtnetlink,
  name: string,
  stateDir: string,
): { index: number; mtu: number; ip: string; mac: string | undefined } {
  const link = nl.linkByName(name);
  if (!link) throw new InvalidConfigError(`agent config: uplink: no interface ${name}`);
  const addrs = nl.addresses({ index: link.index }).filter((a) => a.scope === RT_SCOPE_UNIVERSE);
  const addr = addrs.find((a) => a.family === AF_INET) ?? addrs[0];
  // Bridging mode, after a run that was killed with the uplink moved: bridging restores it shortly.
  const saved = addr ? undefined : savedUplinkIp(stateDir, name);
  if (saved) return { index: link.index, mtu: link.mtu, ip: saved, mac: link.mac };
  if (!addr) throw new InvalidConfigError(`agent config: uplink: ${name} has no global address`);
  return { index: link.index, mtu: link.mtu, ip: addr.address, mac: link.mac };
}

/** What cluster mode settles before the datapath starts: the store, the uplink, the pod CIDRs, the MTU. */
export interface ClusterOpen {
  podCIDRs: string[];
  /** The pod CIDRs are the ones remembered in node-lease.json: the store did not answer at start. */
  remembered?: boolean;
  /** The pod MTU once encapsulation is paid for. */
  mtu: number;
  /** Absent on a single node (no `cluster:` section). */
  cluster?: {
    settings: ClusterSettings;
    store: ClusterStore;
    uplink: ReturnType<typeof uplinkOf>;
  };
}

/**
 * Opens the store and settles this node's pod CIDRs (leased, or taken from the config or the file)
 * and the pod MTU. A single node returns its configured CIDRs and MTU and opens nothing.
 */
export async function openCluster(
  config: AgentConfig,
  nl: Rtnetlink,
  log: Logger,
  undo: UndoStack,
): Promise<ClusterOpen> {
  const c: ClusterSettings | undefined = config.cluster;
  if (!c) return { podCIDRs: config.podCIDRs, mtu: config.mtu };
  const uplink = uplinkOf(nl, c.uplink, config.stateDir);
  const plain = insecureEndpoints(c.store);
  if (plain.length > 0) {
    log.warn(
      'cluster store over plain http (cluster.insecure: true): anyone who reaches etcd can rewrite routes, leases and pools',
      {
        endpoints: plain,
      },
    );
  }
  // Certificates or credentials that etcd refuses, or that name an etcd we do not trust, stop the start here.
  const store = await openClusterStore(c.store, {
    nodeName: c.nodeName,
    kubeLog: (event, fields) => {
      if (event === 'kube-listed') log.info(event, fields);
      else log.warn(event, fields);
    },
  });
  undo.push('cluster store', () => store.close());
  const { podCIDRs, remembered } = await resolvePodCIDRs(
    membershipOptions(config, c, store, uplink.ip, log),
    c.pool,
    config.podCIDRs,
    LEASE_WAIT_MS,
  );
  const overhead = c.trafficMode === 'encap' ? vxlanOverhead(uplink.ip) : 0;
  const mtu = Math.min(config.mtu, uplink.mtu - overhead);
  if (mtu < config.mtu)
    log.info('pod MTU lowered for encapsulation', { mtu, uplinkMtu: uplink.mtu, overhead });
  return { podCIDRs, remembered, mtu, cluster: { settings: c, store, uplink } };
}

function membershipOptions(
  config: AgentConfig,
  c: ClusterSettings,
  store: ClusterStore,
  underlayIP: string,
  log: Logger,
) {
  return { store, nodeName: c.nodeName, underlayIP, stateDir: config.stateDir, log };
}

export interface ClusterStart {
  node: ClusterNode | undefined;
  /** The store's IP pools, when it keeps any (etcd). */
  pools: PoolStore | undefined;
}

/**
 * Once the datapath is up: starts the overlay (sending through `underlayIndex`, the interface that
 * holds the underlay IP: the uplink, or in bridging mode the interface that took its addresses) and
 * the membership that follows the store.
 */
export async function startMembership(
  config: AgentConfig,
  opened: ClusterOpen,
  nl: Rtnetlink,
  underlayIndex: number | undefined,
  log: Logger,
  undo: UndoStack,
  egress?: EgressControl,
): Promise<ClusterStart> {
  if (!opened.cluster) return { node: undefined, pools: undefined };
  const { settings: c, store, uplink } = opened.cluster;
  const { podCIDRs } = opened;
  // Bench only: the peer programming of before issue 17, measured beside the current one.
  const legacyPeerProgramming = process.env.PODWIRE_BENCH_LEGACY_PEERS === '1';
  const overlay =
    c.trafficMode === 'encap'
      ? new VxlanOverlay({
          nl,
          nodeName: c.nodeName,
          uplinkIndex: underlayIndex ?? uplink.index,
          underlayIP: uplink.ip,
          uplinkMtu: uplink.mtu,
          podCIDRs,
          legacyPeerProgramming,
        })
      : new RoutedOverlay({
          nl,
          uplinkIndex: underlayIndex ?? uplink.index,
          podCIDRs,
          legacyPeerProgramming,
        });
  // Only peers may use the tunnel (decision 28): the guard first, so the socket is never open to pods.
  // A node without VXLAN drops the guard of an earlier encap run; without nft there is none to drop.
  const nft = nftIn();
  const vxlanGuard =
    c.trafficMode === 'encap'
      ? await VxlanGuard.start(nft, VXLAN_PORT, uplink.ip, (msg, fields) => log.warn(msg, fields))
      : await removeVxlanGuard(nft).then(
          () => undefined,
          (err: unknown) => log.info('no VXLAN guard to remove', { reason: String(err) }),
        );
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
  const options = {
    ...membershipOptions(config, c, store, uplink.ip, log),
    ...(c.pool ? { clusterCIDRs: c.pool.clusterCIDRs } : {}),
    // Remembered CIDRs are checked with the store once it answers, before the record is published.
    ...(opened.remembered ? { remembered: { pool: c.pool } } : {}),
    legacyPeerProgramming,
  };
  const onPeers = async (peers: readonly NodeRecord[]) => {
    await vxlanGuard?.setPeers(peers);
    await egress?.setPeers(peers);
  };
  const node = new ClusterNode({ ...options, onPeers }, overlay, record);
  node.start();
  undo.push('cluster membership', () => node.stop());
  return { node, pools: store.pools };
}
