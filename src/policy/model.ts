/**
 * NetworkPolicy as podwire's policy compiler sees it: what goes in (policies, pods and namespaces as
 * the watch layer decodes them from the API server) and what comes out (each local pod's allowed
 * peers and ports per direction, neutral to the datapath). The compiler (`compile.ts`) is the only
 * producer of `PodPolicy`; each datapath's backend is a consumer and reads nothing else of policy.
 *
 * Inputs follow networking.k8s.io/v1 and core/v1 field for field, already validated (the decoders
 * refuse what the API server would refuse), so the compiler never meets a malformed object.
 */

export type Protocol = 'TCP' | 'UDP' | 'SCTP';

export interface LabelSelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  /** Non-empty for In and NotIn; empty for Exists and DoesNotExist. */
  values: string[];
}

/** A label selector; both parts empty selects everything. */
export interface LabelSelector {
  matchLabels: Record<string, string>;
  matchExpressions: LabelSelectorRequirement[];
}

export interface IpBlock {
  /** Canonical CIDR text (host bits zero). */
  cidr: string;
  /** Canonical CIDRs, each strictly inside `cidr`, of the same family. */
  except: string[];
}

/**
 * One peer of a rule. Exactly one of the three shapes, as the API allows:
 * - `pods`: the pods matching `podSelector` in the namespaces matching `namespaceSelector`; a missing
 *   `namespaceSelector` means the policy's own namespace (`namespaceSelector: null` here);
 * - `ipBlock`.
 */
export type PolicyPeer =
  | { kind: 'pods'; podSelector: LabelSelector; namespaceSelector: LabelSelector | null }
  | { kind: 'ipBlock'; ipBlock: IpBlock };

export interface PolicyPort {
  protocol: Protocol;
  /** Missing: every port of the protocol. A string is a named port (an IANA_SVC_NAME). */
  port?: number | string;
  /** Only with a numeric `port`; `endPort >= port`. */
  endPort?: number;
}

export interface PolicyRule {
  /** `from` of an ingress rule or `to` of an egress rule; `null` when missing or empty: every peer. */
  peers: PolicyPeer[] | null;
  /** `null` when missing or empty: every port and protocol. */
  ports: PolicyPort[] | null;
}

export interface NetworkPolicy {
  namespace: string;
  name: string;
  podSelector: LabelSelector;
  /** As the API server stores it: defaulted (Ingress, plus Egress when egress rules exist). */
  policyTypes: Array<'Ingress' | 'Egress'>;
  ingress: PolicyRule[];
  egress: PolicyRule[];
}

export interface ContainerPort {
  name?: string;
  containerPort: number;
  protocol: Protocol;
}

export interface Pod {
  namespace: string;
  name: string;
  /** `null` while the Pod object has not arrived (a pod this node wired from its ADD alone). */
  labels: Record<string, string> | null;
  /** Canonical addresses (`status.podIPs`, or the addresses the node's IPAM gave a local pod). */
  ips: string[];
  /** Every container's ports, init containers excluded. */
  ports: ContainerPort[];
  hostNetwork: boolean;
  /** `spec.nodeName`; empty while unscheduled. */
  node: string;
}

export interface Namespace {
  name: string;
  labels: Record<string, string>;
}

export interface PortRange {
  protocol: Protocol;
  /** Inclusive; a rule without a port is 0-65535 of its protocol. */
  first: number;
  last: number;
}

/** Peers and ports allowed together. `'any'` peers: every address; `'any'` ports: every protocol and port. */
export interface AllowEntry {
  /** Canonical CIDRs, disjoint, an ipBlock's `except` already taken out. */
  peers: 'any' | string[];
  ports: 'any' | PortRange[];
}

export interface CompiledRule {
  /** `NAMESPACE/NAME/ingress/INDEX` or `.../egress/INDEX`: the rule's index in its policy. */
  id: string;
  /** Several entries when a named port resolves to different numbers for different peers. */
  entries: AllowEntry[];
}

/**
 * One direction of one pod. `null` in `PodPolicy`: no policy isolates the pod for this direction
 * and everything passes. Otherwise only what some rule allows passes (replies of allowed
 * connections aside, which the backends pass by connection tracking).
 */
export interface DirectionPolicy {
  /** `NAMESPACE/NAME` of each policy that isolates the pod for this direction, sorted. */
  policies: string[];
  rules: CompiledRule[];
}

/** What one local pod may send and receive. */
export interface PodPolicy {
  namespace: string;
  name: string;
  ips: string[];
  ingress: DirectionPolicy | null;
  egress: DirectionPolicy | null;
}
