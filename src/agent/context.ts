/** What every CNI command handler works with; owned by the `Agent`, which builds and closes it. */
import type { Announcer } from '../arp/announcer.js';
import type { PodCache } from '../cluster/kube-pod-cache.js';
import type { Datapath } from '../datapath/datapath.js';
import type { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import type { NetnsHandle } from '../kernel/netns.js';
import type { PodIpam } from './cni/pod-ipam.js';
import type { AgentConfig } from './config.js';
import type { Logger } from './log.js';
import type { DenyLogger } from './policy/deny-logger.js';
import type { PolicyController } from './policy/policy-controller.js';
import type { ClusterNode } from './startup/cluster-node.js';
import type { EgressControl } from './startup/egress-start.js';

export interface AgentContext {
  config: AgentConfig;
  /** The agent's own (node) namespace; every `inNetns` returns here. */
  home: NetnsHandle;
  /**
   * Netlink socket in the node namespace. Shared by requests, which is safe only because every
   * netlink exchange is synchronous: no request can interleave inside another's exchange.
   */
  nl: Rtnetlink;
  ipam: PodIpam;
  datapath: Datapath;
  announcer: Announcer;
  log: Logger;
  /** This node's cluster membership; undefined on a single node. */
  cluster: ClusterNode | undefined;
  /** The egress masquerade (decision 20); undefined when `egressMasquerade: false`. */
  egress?: EgressControl | undefined;
  /**
   * Pods and namespaces from the API server, this node's pods matched to their ADDs (decision 47);
   * only with `cluster.store: kubernetes`. ADD and DEL tell it synchronously and never wait for it.
   */
  pods?: PodCache | undefined;
  /**
   * NetworkPolicy (decision 49); only with `cluster.store: kubernetes` and a datapath with a policy
   * backend. ADD waits for `settled()` before the pod's port forwards.
   */
  policy?: PolicyController | undefined;
  /** Denied packets logged (decision 51); where the datapath's policy backend has a deny log. */
  denyLog?: DenyLogger | undefined;
}
