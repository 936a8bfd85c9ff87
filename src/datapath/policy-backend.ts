/**
 * The `PolicyBackend` seam: how a datapath enforces the NetworkPolicy that the compiler
 * (`policy/compile.ts`) has turned into each local pod's allowed peers and ports (`policy/model.ts`).
 * One implementation per datapath: nftables on the Linux bridge, OpenFlow conjunctions on OVS. Both
 * pass the same behavioural tests; the agent drives them the same way.
 *
 * The contract every backend keeps:
 * - `apply` takes the complete desired state for this node (every local pod that has addresses) and
 *   makes the datapath match it in one atomic step: a packet meets either the old rules or the new,
 *   never a mix, and a pod absent from the list is not subject to policy (no rule of its own is left);
 * - a pod whose direction is `null` passes everything in that direction; a `DirectionPolicy` with no
 *   rules passes nothing in it but the replies of connections it was allowed to open, and the other
 *   direction's replies;
 * - replies of allowed connections pass (connection tracking); traffic the node itself sends to its
 *   pods passes (kubelet probes); a backend that fails leaves the previous state in force and throws;
 * - `apply` calls are not concurrent: the caller serialises them.
 */
import type { PodPolicy } from '../policy/model.js';

export interface RuleCounters {
  /** `CompiledRule.id`, or `NAMESPACE/NAME/ingress/deny` for what a pod's isolation dropped. */
  rule: string;
  /** The local pod, `NAMESPACE/NAME`. */
  pod: string;
  packets: bigint;
  bytes: bigint;
}

/** A packet a pod's isolation dropped, as the datapath reports it (decision 51). */
export interface DeniedPacket {
  direction: 'ingress' | 'egress';
  src: string;
  dst: string;
  /** 'TCP', 'UDP', 'SCTP', 'ICMP', 'ICMPv6', or the IP protocol number as text. */
  protocol: string;
  /** The destination port (TCP, UDP, SCTP), when the header was there. */
  port?: number;
}

/** The datapath's stream of denied packets, rate-limited at the source; read without waiting. */
export interface DeniedPacketLog {
  /**
   * What arrived since the last read (at most a bounded number of the kernel's messages per call), and
   * how often packets were lost to an overrun of the kernel's queue.
   */
  read(): { packets: DeniedPacket[]; overruns: number };
  /** Releases the source (its socket); idempotent. */
  close(): void;
}

export interface PolicyBackend {
  /** Creates or adopts the backend's fixed objects (tables, chains, flows); idempotent. */
  start(): Promise<void>;
  /** Makes the datapath enforce exactly `pods` (see the contract above). */
  apply(pods: readonly PodPolicy[]): Promise<void>;
  /** Allowed packets per rule and denied packets per pod and direction, read from the datapath. */
  counters(): Promise<RuleCounters[]>;
  /** Opens the log of denied packets, where the datapath has one (the Linux bridge: NFLOG). */
  openDenyLog?(): DeniedPacketLog;
  /** Removes everything the backend installed (the agent's uninstall; tests). */
  remove(): Promise<void>;
}
