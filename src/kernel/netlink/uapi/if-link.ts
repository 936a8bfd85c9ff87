/** Constants of linux/if_link.h: link attributes (IFLA_*), IFLA_LINKINFO's nest, operational states. */

export const IFLA_UNSPEC = 0;
export const IFLA_ADDRESS = 1;
export const IFLA_BROADCAST = 2;
export const IFLA_IFNAME = 3;
export const IFLA_MTU = 4;
export const IFLA_LINK = 5;
export const IFLA_QDISC = 6;
export const IFLA_STATS = 7;
export const IFLA_MASTER = 10;
/** For a bridge port (family AF_BRIDGE): nested IFLA_BRPORT_*, or, in the old binary form, one u8 port state. */
export const IFLA_PROTINFO = 12;
export const IFLA_TXQLEN = 13;
export const IFLA_OPERSTATE = 16;
export const IFLA_LINKMODE = 17;
export const IFLA_LINKINFO = 18;
export const IFLA_NET_NS_PID = 19;
export const IFLA_IFALIAS = 20;
export const IFLA_AF_SPEC = 26;
export const IFLA_GROUP = 27;
export const IFLA_NET_NS_FD = 28;
export const IFLA_EXT_MASK = 29;
export const IFLA_PROMISCUITY = 30;
export const IFLA_CARRIER = 33;
export const IFLA_LINK_NETNSID = 37;
export const IFLA_MIN_MTU = 50;
export const IFLA_MAX_MTU = 51;

/** Attributes nested in IFLA_LINKINFO. */
export const IFLA_INFO_UNSPEC = 0;
export const IFLA_INFO_KIND = 1;
export const IFLA_INFO_DATA = 2;
export const IFLA_INFO_XSTATS = 3;
export const IFLA_INFO_SLAVE_KIND = 4;
export const IFLA_INFO_SLAVE_DATA = 5;

/** RFC 2863 operational states (IFLA_OPERSTATE), named as `ip -j link` prints them. */
export const IF_OPER_UNKNOWN = 0;
export const IF_OPER_NOTPRESENT = 1;
export const IF_OPER_DOWN = 2;
export const IF_OPER_LOWERLAYERDOWN = 3;
export const IF_OPER_TESTING = 4;
export const IF_OPER_DORMANT = 5;
export const IF_OPER_UP = 6;

const OPERSTATE_NAMES = ['UNKNOWN', 'NOTPRESENT', 'DOWN', 'LOWERLAYERDOWN', 'TESTING', 'DORMANT', 'UP'];

export function operstateName(state: number): string {
  return OPERSTATE_NAMES[state] ?? `${state}`;
}

/** IFLA_BRPORT_* (inside IFLA_INFO_SLAVE_DATA of a bridge port). */
export const IFLA_BRPORT_STATE = 1;
/** u8: hairpin mode, the bridge may send a frame back out of the port it came in on. */
export const IFLA_BRPORT_MODE = 4;
/** u8: the bridge floods unicast frames to unknown destinations out of this port (`bridge link set flood`). */
export const IFLA_BRPORT_UNICAST_FLOOD = 9;

/** BR_STATE_* (linux/if_bridge.h): a port passes frames only in FORWARDING. */
export const BR_STATE_DISABLED = 0;
export const BR_STATE_LISTENING = 1;
export const BR_STATE_LEARNING = 2;
export const BR_STATE_FORWARDING = 3;
export const BR_STATE_BLOCKING = 4;
