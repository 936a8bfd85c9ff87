/**
 * The `Datapath` seam: what carries pod frames on the node. The agent creates the veth pair and
 * configures the pod side; a datapath attaches the host end and owns everything node-side (bridge,
 * gateway, flows). Every implementation passes test/datapath/compliance.ts.
 */
import type { PolicyBackend } from './policy-backend.js';

export interface GatewayAddress {
  family: 4 | 6;
  address: string;
  prefixLength: number;
}

/** The host end of one pod attachment, as the datapath sees it. */
export interface PodPort {
  /** Host end of the veth, in the node namespace. */
  hostIfname: string;
  hostIfindex: number;
  containerId: string;
  ifname: string;
  /**
   * MAC and addresses of the pod side, for datapaths that guard or route by them. Both are empty when
   * reconcile re-attaches a running pod after a restart: a datapath that needs them reads what it
   * recorded at the first attach.
   */
  podMac: string;
  podIps: string[];
  /** The Kubernetes pod as "namespace/name" (CNI_ARGS K8S_POD_NAMESPACE, K8S_POD_NAME), when sent. */
  pod?: string | undefined;
  /**
   * The VLAN of the pod's pool (1-4094): the pod is an untagged member of it, and its frames leave the
   * uplink tagged (bridging mode). Absent or 0: untagged, the node's own L2.
   */
  vlan?: number | undefined;
}

/** The node's uplink as bridging mode hands it to the datapath. */
export interface UplinkPort {
  ifname: string;
  index: number;
  /** The uplink's MAC: the node's MAC on the underlay, which the gateway interface takes over. */
  mac: string;
  /** The node's addresses on the uplink, which the gateway interface takes over (without prefix length). */
  ips: string[];
}

export interface DatapathStatus {
  ready: boolean;
  /** Why the datapath cannot serve ADD when `ready` is false. */
  reason?: string;
}

export interface Datapath {
  readonly kind: string;
  /**
   * False when the pod's kernel must complete its checksums before a frame leaves the pod: ADD then
   * turns tx-checksumming off on the pod side of the veth (with it TSO and the other offloads that
   * need it). OVS's userspace datapath cannot carry a pending checksum at all; elsewhere a pending
   * checksum would be completed after the guards, at offsets the pod chose, unless the datapath
   * completes it before them (the checksum hop, checksum-ifb.ts, decision 32).
   */
  readonly podTxChecksumming: boolean;
  /**
   * Whether a pod's egress rate can be shaped on its host veth's ingress (pod-bandwidth.ts): the
   * datapath receives the frame after tc ingress. False on OVS's userspace datapath, whose packet
   * sockets read the port before tc ingress: an egress rate is refused there (decision 42).
   */
  readonly podEgressShaping: boolean;
  /** Whether pods' frames meet the identity guards (decision 17); absent: always on (OVS). */
  readonly podGuards?: 'on' | 'off';
  /** Creates or adopts the node-side objects; idempotent, safe after a restart with pods running. */
  start(): Promise<void>;
  /**
   * Optional: starts what a switch in another process does for a new port (OVS: the port's row and its
   * flows), so that it works while ADD configures the pod side; `attachPort` of the same port then
   * finishes it, and `detachPort` first waits for it. Leaves the host link down; a failure surfaces
   * from `attachPort`. Absent where attaching is the agent's own work (the Linux bridge).
   */
  openPort?(port: PodPort): void;
  /** Attaches and enables the port; resolves when the datapath will carry the pod's frames. */
  attachPort(port: PodPort): Promise<void>;
  /**
   * Makes the port carry no frame any more, at once, before its veth is deleted: after it resolves
   * the pod's address may go to another pod while the kernel unregisters the veth (~20 ms). The
   * Linux bridge disables the port; OVS removes the port's flows and row. Succeeds when it is gone.
   */
  isolatePort(hostIfname: string): Promise<void>;
  /** Detaches the port; succeeds when it is already gone. */
  detachPort(hostIfname: string): Promise<void>;
  /** Throws ERR_CHECK_FAILED, naming what differs, when the port is not attached as `attachPort` left it. */
  checkPort(hostIfname: string): Promise<void>;
  /** Host interface names of every attached pod port. */
  ports(): Promise<string[]>;
  /**
   * Bridging mode: gives the gateway interface the uplink's MAC, then makes the uplink a port of the
   * bridge that carries frames between the underlay and the pods (the node's own frames go through the
   * gateway interface, which takes over the node's addresses). Resolves when the port forwards.
   */
  attachUplink(uplink: UplinkPort): Promise<void>;
  /** Takes the uplink out of the bridge and gives the gateway interface `targetMac` back. Idempotent. */
  detachUplink(uplink: { ifname: string; index: number; targetMac: string }): Promise<void>;
  status(): DatapathStatus;
  /**
   * Packets the datapath dropped, per guard (e.g. OVS's "ARP_SPOOF_GUARD": forged ARP from pods, the
   * Linux bridge's "GATEWAY_ARP_GUARD": ARP the node tried to send as someone else).
   */
  dropCounters?(): Promise<Array<{ guard: string; packets: number }>>;
  /**
   * Counters of a datapath that talks to a switch daemon (OVS): connections made again after one was
   * lost, by connection, and replays of the whole wanted state after the switch came back.
   */
  switchCounters?(): { reconnects: Record<string, number>; replays: number; replayedFlows: number };
  /**
   * NetworkPolicy's backend for this datapath (policy-backend.ts), made once, after `start()`; absent
   * where the datapath has none.
   */
  policyBackend?(): PolicyBackend;
  /** Releases the datapath's own resources; leaves the node-side objects so running pods keep working. */
  stop(): Promise<void>;
}
