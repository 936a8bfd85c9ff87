/**
 * Cross-node pod traffic: how a node reaches the pod CIDRs of its peers. The agent hands an `Overlay`
 * the full list of peers whenever it changes (level-triggered: the overlay converges the kernel to
 * exactly that list, adding what is missing and removing what is no longer wanted).
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
  /** Converges routes (and neighbour/FDB entries) to exactly these peers. */
  setPeers(peers: readonly PeerNode[]): Promise<OverlayStatus>;
  /** Leaves the kernel state in place: pods keep talking across nodes while the agent is down. */
  stop(): Promise<void>;
}

/**
 * rtm_protocol of every route podwire programs for peers, so that it finds (and removes) exactly its
 * own routes and never anyone else's. 250 is unassigned in iproute2's rt_protos.
 */
export const RTPROT_PODWIRE = 250;
