/**
 * The kernel objects rtnetlink reports, as podwire reads them: addresses as text (`ip` notation),
 * numbers keep the kernel's values (IFF_*, IFA_F_*, RTPROT_*, RT_SCOPE_*, RT_TABLE_*).
 */

/** A network interface (RTM_NEWLINK). */
export interface Link {
  index: number;
  name: string;
  /** IFLA_INFO_KIND: 'veth', 'bridge', ...; undefined for physical devices and loopback. */
  kind?: string;
  /** IFLA_ADDRESS as lower-case colon notation. */
  mac?: string;
  mtu: number;
  /** ifi_flags (IFF_*). */
  flags: number;
  /** IFF_UP: administratively up. */
  up: boolean;
  /** IFLA_MASTER: the bridge (or bond) this link is enslaved to. */
  masterIndex?: number;
  /** IFLA_BRPORT_STATE (BR_STATE_*) from IFLA_INFO_SLAVE_DATA, when the link is a bridge port. */
  bridgePortState?: number;
  /** IFLA_OPERSTATE, named as `ip -j link` prints it: 'UP', 'DOWN', 'LOWERLAYERDOWN', 'UNKNOWN', ... */
  operstate?: string;
  /** IFLA_LINK: for a veth, the peer's index (in the peer's namespace when linkNetnsId is set). */
  linkIndex?: number;
  /** IFLA_LINK_NETNSID: the peer's namespace id, as seen from this link's namespace. */
  linkNetnsId?: number;
}

/** An interface address (RTM_NEWADDR). */
export interface Addr {
  index: number;
  family: number;
  /** The local address: IFA_LOCAL when present (IPv4), else IFA_ADDRESS. */
  address: string;
  prefixLength: number;
  /** IFA_FLAGS when present, else ifa_flags (IFA_F_*). */
  flags: number;
  /** ifa_scope (RT_SCOPE_*). */
  scope: number;
  /** IFA_LABEL (IPv4 only). */
  label?: string;
}

/** A route (RTM_NEWROUTE). */
export interface Route {
  family: number;
  /** CIDR; undefined for a default route (prefix length 0). */
  dst?: string;
  gateway?: string;
  /** RTA_OIF: output interface index. */
  oif?: number;
  /** RTA_TABLE when present, else rtm_table. */
  table: number;
  protocol: number;
  scope: number;
  /** rtm_type (RTN_*). */
  type: number;
  /** RTA_PRIORITY, the metric. */
  priority?: number;
  /** RTA_PREFSRC. */
  prefsrc?: string;
  /** rtm_flags (RTNH_F_ONLINK, RTNH_F_LINKDOWN, ...). */
  flags: number;
}

export interface VethSpec {
  /** The end created in the socket's own namespace. */
  name: string;
  /** The other end, created directly in the namespace of `peerNetnsFd` when given. */
  peerName: string;
  /** Set on both ends. */
  mtu: number;
  /** An open network-namespace descriptor (e.g. of /var/run/netns/X); the caller keeps ownership. */
  peerNetnsFd?: number;
  mac?: string;
  peerMac?: string;
}

export interface BridgeSpec {
  name: string;
  mtu: number;
  mac?: string;
}

export interface AddressSpec {
  /** An IPv4 or IPv6 address without prefix. */
  address: string;
  prefixLength: number;
}

export interface AddressOptions {
  /** IFA_F_NODAD: skip IPv6 duplicate address detection so the address is usable at once. */
  nodad?: boolean;
  /** IFA_F_NOPREFIXROUTE: do not add the prefix route. */
  noprefixroute?: boolean;
}

export interface RouteSpec {
  /** AF_INET or AF_INET6; inferred from dst or gateway when omitted. */
  family?: number;
  /** CIDR; undefined adds a default route. */
  dst?: string;
  gateway?: string;
  oif: number;
  /** Defaults as `ip route add` does: RT_SCOPE_LINK for an IPv4 route without gateway, else universe. */
  scope?: number;
  /** Defaults to RTPROT_BOOT, as `ip route add`. */
  protocol?: number;
  priority?: number;
  /** RTNH_F_ONLINK: the gateway is on the link even if no prefix covers it. */
  onlink?: boolean;
}
