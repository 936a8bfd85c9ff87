/** linux/if_bridge.h and linux/if_link.h (IFLA_BR_*): bridge VLAN filtering. */

/** Inside IFLA_AF_SPEC of an AF_BRIDGE link message. */
export const IFLA_BRIDGE_FLAGS = 0;
export const IFLA_BRIDGE_VLAN_INFO = 2;

/** IFLA_BRIDGE_FLAGS: the request is for the bridge device itself (`self`), not a port's master. */
export const BRIDGE_FLAGS_SELF = 2;

/** struct bridge_vlan_info.flags */
export const BRIDGE_VLAN_INFO_PVID = 1 << 1;
export const BRIDGE_VLAN_INFO_UNTAGGED = 1 << 2;

/** IFLA_BR_* inside IFLA_INFO_DATA of kind "bridge". */
export const IFLA_BR_VLAN_FILTERING = 7;
/** struct br_boolopt_multi { u32 optval; u32 optmask; }: boolean bridge options, by bit. */
export const IFLA_BR_MULTI_BOOLOPT = 46;
/** enum br_boolopt_id: no source-MAC learning from link-local frames (01:80:c2:00:00:0X). */
export const BR_BOOLOPT_NO_LL_LEARN = 0;

/** IFLA_EXT_MASK bit: report each port's VLANs in IFLA_AF_SPEC. */
export const RTEXT_FILTER_BRVLAN = 1 << 1;
