/**
 * Constants of linux/rtnetlink.h: message types, route types, protocols, scopes, tables and the
 * route attributes (RTA_*).
 */

export const RTM_NEWLINK = 16;
export const RTM_DELLINK = 17;
export const RTM_GETLINK = 18;
export const RTM_SETLINK = 19;
export const RTM_NEWADDR = 20;
export const RTM_DELADDR = 21;
export const RTM_GETADDR = 22;
export const RTM_NEWROUTE = 24;
export const RTM_DELROUTE = 25;
export const RTM_GETROUTE = 26;
export const RTM_NEWNEIGH = 28;
export const RTM_DELNEIGH = 29;
export const RTM_GETNEIGH = 30;
export const RTM_NEWQDISC = 36;
export const RTM_GETQDISC = 38;
export const RTM_NEWTFILTER = 44;
export const RTM_GETTFILTER = 46;

const RTM_NAMES = new Map<number, string>([
  [RTM_NEWLINK, 'RTM_NEWLINK'],
  [RTM_DELLINK, 'RTM_DELLINK'],
  [RTM_GETLINK, 'RTM_GETLINK'],
  [RTM_SETLINK, 'RTM_SETLINK'],
  [RTM_NEWADDR, 'RTM_NEWADDR'],
  [RTM_DELADDR, 'RTM_DELADDR'],
  [RTM_GETADDR, 'RTM_GETADDR'],
  [RTM_NEWROUTE, 'RTM_NEWROUTE'],
  [RTM_DELROUTE, 'RTM_DELROUTE'],
  [RTM_GETROUTE, 'RTM_GETROUTE'],
  [RTM_NEWNEIGH, 'RTM_NEWNEIGH'],
  [RTM_DELNEIGH, 'RTM_DELNEIGH'],
  [RTM_GETNEIGH, 'RTM_GETNEIGH'],
  [RTM_NEWQDISC, 'RTM_NEWQDISC'],
  [RTM_GETQDISC, 'RTM_GETQDISC'],
  [RTM_NEWTFILTER, 'RTM_NEWTFILTER'],
  [RTM_GETTFILTER, 'RTM_GETTFILTER'],
]);

/** The kernel's name of a message type, used as the `syscall` of a KernelError. */
export function rtmTypeName(type: number): string {
  return RTM_NAMES.get(type) ?? `RTM_${type}`;
}

/** rtm_type */
export const RTN_UNSPEC = 0;
export const RTN_UNICAST = 1;
export const RTN_LOCAL = 2;
export const RTN_BROADCAST = 3;
export const RTN_ANYCAST = 4;
export const RTN_MULTICAST = 5;
export const RTN_BLACKHOLE = 6;
export const RTN_UNREACHABLE = 7;
export const RTN_PROHIBIT = 8;

/** rtm_protocol */
export const RTPROT_UNSPEC = 0;
export const RTPROT_REDIRECT = 1;
export const RTPROT_KERNEL = 2;
export const RTPROT_BOOT = 3;
export const RTPROT_STATIC = 4;
export const RTPROT_RA = 9;

/** rtm_scope (also ifa_scope) */
export const RT_SCOPE_UNIVERSE = 0;
export const RT_SCOPE_SITE = 200;
export const RT_SCOPE_LINK = 253;
export const RT_SCOPE_HOST = 254;
export const RT_SCOPE_NOWHERE = 255;

/** rtm_table; ids above 255 travel in RTA_TABLE only. */
export const RT_TABLE_UNSPEC = 0;
export const RT_TABLE_DEFAULT = 253;
export const RT_TABLE_MAIN = 254;
export const RT_TABLE_LOCAL = 255;

/** rtm_flags */
export const RTM_F_NOTIFY = 0x100;
export const RTM_F_CLONED = 0x200;

/** rtnh_flags, also accepted in rtm_flags for a single nexthop. */
export const RTNH_F_DEAD = 1;
export const RTNH_F_ONLINK = 4;
export const RTNH_F_LINKDOWN = 16;

/** enum rtattr_type_t */
export const RTA_UNSPEC = 0;
export const RTA_DST = 1;
export const RTA_SRC = 2;
export const RTA_IIF = 3;
export const RTA_OIF = 4;
export const RTA_GATEWAY = 5;
export const RTA_PRIORITY = 6;
export const RTA_PREFSRC = 7;
export const RTA_METRICS = 8;
export const RTA_MULTIPATH = 9;
export const RTA_FLOW = 11;
export const RTA_CACHEINFO = 12;
export const RTA_TABLE = 15;
export const RTA_MARK = 16;
export const RTA_VIA = 18;
export const RTA_PREF = 20;
export const RTA_EXPIRES = 23;

/** IFLA_EXT_MASK bits. */
export const RTEXT_FILTER_VF = 1 << 0;
