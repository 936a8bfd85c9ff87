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
  /** IFLA_IFALIAS, when set and not empty. */
  alias?: string;
  /** IFLA_GROUP: the interface group (`ip link set group N`; nftables `meta iifgroup`). */
  group?: number;
  /** IFLA_MASTER: the bridge (or bond) this link is enslaved to. */
  masterIndex?: number;
  /** IFLA_BRPORT_STATE (BR_STATE_*) from IFLA_INFO_SLAVE_DATA, when the link is a bridge port. */
  bridgePortState?: number;
  /** IFLA_BRPORT_MODE from IFLA_INFO_SLAVE_DATA, when the link is a bridge port: hairpin mode on. */
  bridgePortHairpin?: boolean;
  /** IFLA_BRPORT_UNICAST_FLOOD from IFLA_INFO_SLAVE_DATA, when the link is a bridge port: unknown unicast flooded to it. */
  bridgePortUnicastFlood?: boolean;
  /** IFLA_OPERSTATE, named as `ip -j link` prints it: 'UP', 'DOWN', 'LOWERLAYERDOWN', 'UNKNOWN', ... */
  operstate?: string;
  /** IFLA_LINK: for a veth, the peer's index (in the peer's namespace when linkNetnsId is set). */
  linkIndex?: number;
  /** IFLA_LINK_NETNSID: the peer's namespace id, as seen from this link's namespace. */
  linkNetnsId?: number;
  /** IFLA_INFO_DATA of a vxlan link (kind 'vxlan'). */
  vxlan?: VxlanInfo;
}

/** What a vxlan link reports of its configuration (IFLA_VXLAN_*). */
export interface VxlanInfo {
  /** IFLA_VXLAN_ID. */
  vni: number;
  /** IFLA_VXLAN_PORT: the UDP destination port. */
  port: number;
  /** IFLA_VXLAN_LOCAL or IFLA_VXLAN_LOCAL6: the source address on the underlay. */
  local?: string;
  /** IFLA_VXLAN_LINK: the underlay interface. */
  underlayIndex?: number;
  /** IFLA_VXLAN_LEARNING. */
  learning: boolean;
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
  /** IFLA_GROUP of the `name` end, set by the request that creates it (so it never exists without). */
  group?: number;
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

export interface VxlanSpec {
  name: string;
  /** VXLAN network identifier, 0..2^24-1. */
  vni: number;
  /** UDP destination port; 4789 (IANA_VXLAN_UDP_PORT) unless the overlay says otherwise. */
  port: number;
  /** The underlay IP the packets leave from (IFLA_VXLAN_LOCAL / IFLA_VXLAN_LOCAL6). */
  local?: string;
  /** The underlay interface (IFLA_VXLAN_LINK). */
  underlayIndex?: number;
  /** The kernel clamps it to the underlay's MTU less the VXLAN headroom (50 bytes over IPv4). */
  mtu: number;
  mac?: string;
  /** Learn remote MACs from received packets; default false (`nolearning`). */
  learning?: boolean;
}

/** A neighbour (ARP or NDP) entry (RTM_NEWNEIGH, family AF_INET or AF_INET6). */
export interface Neigh {
  index: number;
  family: number;
  /** NDA_DST. */
  address: string;
  /** NDA_LLADDR; absent while the entry is unresolved (INCOMPLETE, FAILED). */
  mac?: string;
  /** ndm_state (NUD_*). */
  state: number;
  /** ndm_flags (NTF_*). */
  flags: number;
}

export interface NeighSpec {
  index: number;
  /** An IPv4 or IPv6 address; its family picks the ARP or the NDP table. */
  address: string;
  mac: string;
}

/** A forwarding database entry (RTM_NEWNEIGH, family AF_BRIDGE). */
export interface FdbEntry {
  index: number;
  /** NDA_LLADDR. */
  mac: string;
  /** NDA_DST: on a vxlan device, the remote VTEP the frames are tunnelled to. */
  dst?: string;
  /** ndm_state (NUD_*). */
  state: number;
  /** ndm_flags (NTF_SELF for the device's own entries; a bridge reports its own with `master` set instead). */
  flags: number;
  /** NDA_VNI, when it differs from the vxlan device's. */
  vni?: number;
  /** NDA_PORT, when it differs from the vxlan device's. */
  port?: number;
  /** NDA_VLAN. */
  vlan?: number;
  /** NDA_MASTER: the bridge of an NTF_MASTER entry. */
  master?: number;
}

export interface FdbSpec {
  /** The vxlan device. */
  index: number;
  mac: string;
  /** The remote VTEP's underlay IP. */
  dst: string;
}
