/** Constants of linux/if_link.h: the nest inside IFLA_INFO_DATA of a vxlan link (IFLA_VXLAN_*). */

export const IFLA_VXLAN_UNSPEC = 0;
/** u32: the VXLAN network identifier (24 bits). */
export const IFLA_VXLAN_ID = 1;
/** in_addr: the multicast group or the one remote. */
export const IFLA_VXLAN_GROUP = 2;
/** u32: the underlay interface index. */
export const IFLA_VXLAN_LINK = 3;
/** in_addr: the source address of the encapsulated packets. */
export const IFLA_VXLAN_LOCAL = 4;
export const IFLA_VXLAN_TTL = 5;
export const IFLA_VXLAN_TOS = 6;
/** u8: learn remote MACs from received packets (`learning` / `nolearning`). */
export const IFLA_VXLAN_LEARNING = 7;
export const IFLA_VXLAN_AGEING = 8;
export const IFLA_VXLAN_LIMIT = 9;
export const IFLA_VXLAN_PORT_RANGE = 10;
export const IFLA_VXLAN_PROXY = 11;
export const IFLA_VXLAN_RSC = 12;
export const IFLA_VXLAN_L2MISS = 13;
export const IFLA_VXLAN_L3MISS = 14;
/** __be16, network byte order: the UDP destination port. */
export const IFLA_VXLAN_PORT = 15;
export const IFLA_VXLAN_GROUP6 = 16;
export const IFLA_VXLAN_LOCAL6 = 17;
export const IFLA_VXLAN_UDP_CSUM = 18;
export const IFLA_VXLAN_UDP_ZERO_CSUM6_TX = 19;
export const IFLA_VXLAN_UDP_ZERO_CSUM6_RX = 20;
export const IFLA_VXLAN_REMCSUM_TX = 21;
export const IFLA_VXLAN_REMCSUM_RX = 22;
export const IFLA_VXLAN_GBP = 23;
export const IFLA_VXLAN_REMCSUM_NOPARTIAL = 24;
export const IFLA_VXLAN_COLLECT_METADATA = 25;
export const IFLA_VXLAN_LABEL = 26;
export const IFLA_VXLAN_GPE = 27;
export const IFLA_VXLAN_TTL_INHERIT = 28;
export const IFLA_VXLAN_DF = 29;
export const IFLA_VXLAN_VNIFILTER = 30;

/** The IANA-assigned VXLAN UDP port; the kernel's default is the older 8472. */
export const IANA_VXLAN_UDP_PORT = 4789;
