/**
 * Cross-node pod traffic: how a node reaches the pod CIDRs of its peers. The agent hands an `Overlay`
 * the full list of peers at start, after a store reconnect and periodically (`setPeers`, a full
 * converge: the kernel is read and only what differs from exactly that list is changed), and in
 * between each change of some peers (`updatePeers`, a delta: only the entries of those peers are
 * touched), so programming costs what changed, not the size of the cluster.
 */

/** A peer node as the cluster store records it. */
export interface PeerNode {
  name: string;
  /** The node's underlay address (its uplink's). */
  underlayIP: string;
  podCIDRs: string[];
  /** MAC of the node's VXLAN device (encap mode). */
  vtepMac?: string;
}

/** A change of some peers: the new or changed records, and the names of the peers that are gone. */
export interface PeerChanges {
  put: readonly PeerNode[];
  removed: readonly string[];
}

export interface OverlayStatus {
  /** Peers whose routes are programmed. */
  peers: string[];
  /** Peers that could not be programmed, with the reason (e.g. no VTEP MAC yet, family mismatch). */
  skipped: Array<{ name: string; reason: string }>;
}

export interface Overlay {
  readonly mode: 'encap' | 'noEncap';
  /** Bytes of encapsulation to subtract from the uplink MTU for pod interfaces. */
  readonly overhead: number;
  /** Creates or adopts the local objects (the VXLAN device); returns this node's VTEP MAC if any. */
  start(): Promise<{ vtepMac?: string }>;
  /**
   * Converges routes (and neighbour/FDB entries) to exactly these peers: reads the kernel and changes
   * only the entries that differ. Throws ERR_DATAPATH naming what the kernel refused, after trying
   * everything else.
   */
  setPeers(peers: readonly PeerNode[]): Promise<OverlayStatus>;
  /**
   * Applies a change of some peers: only their entries are touched. Throws as `setPeers`. Returns no
   * status: building one costs O(N log N) (every peer's name, sorted), which a join in slices of 128
   * peers paid per slice; callers ask `status()` once the change is done.
   */
  updatePeers(changes: PeerChanges): Promise<void>;
  /** The peers programmed now and those skipped, with the reason. */
  status(): OverlayStatus;
  /** Leaves the kernel state in place: pods keep talking across nodes while the agent is down. */
  stop(): Promise<void>;
}

/**
 * rtm_protocol of every route podwire programs for peers, so that it finds (and removes) exactly its
 * own routes and never anyone else's. 250 is unassigned in iproute2's rt_protos.
 */
export const RTPROT_PODWIRE = 250;
