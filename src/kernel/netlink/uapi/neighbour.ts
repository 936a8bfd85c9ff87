/**
 * Constants of linux/neighbour.h: neighbour attributes (NDA_*), entry flags (NTF_*) and states
 * (NUD_*). The same messages carry IPv4/IPv6 neighbours (family AF_INET/AF_INET6) and forwarding
 * database entries (family AF_BRIDGE).
 */

/** linux/socket.h: the family of forwarding-database (`bridge fdb`) messages. */
export const AF_BRIDGE = 7;

export const NDA_UNSPEC = 0;
/** The neighbour's network address; for an fdb entry of a vxlan device, the remote VTEP. */
export const NDA_DST = 1;
/** The link-layer (MAC) address. */
export const NDA_LLADDR = 2;
export const NDA_CACHEINFO = 3;
export const NDA_PROBES = 4;
export const NDA_VLAN = 5;
/** __be16: the remote UDP port of a vxlan fdb entry, when it differs from the device's. */
export const NDA_PORT = 6;
export const NDA_VNI = 7;
/** The underlay interface of a vxlan fdb entry. */
export const NDA_IFINDEX = 8;
export const NDA_MASTER = 9;
export const NDA_LINK_NETNSID = 10;
export const NDA_SRC_VNI = 11;
export const NDA_PROTOCOL = 12;
export const NDA_NH_ID = 13;
export const NDA_FDB_EXT_ATTRS = 14;
export const NDA_FLAGS_EXT = 15;

/** Neighbour cache entry flags (ndm_flags). */
export const NTF_USE = 1 << 0;
/** The entry belongs to the device itself (a vxlan's own fdb), not to its bridge master. */
export const NTF_SELF = 1 << 1;
export const NTF_MASTER = 1 << 2;
export const NTF_PROXY = 1 << 3;
export const NTF_EXT_LEARNED = 1 << 4;
export const NTF_OFFLOADED = 1 << 5;
export const NTF_STICKY = 1 << 6;
export const NTF_ROUTER = 1 << 7;

/** Neighbour cache entry states (ndm_state). */
export const NUD_NONE = 0x00;
export const NUD_INCOMPLETE = 0x01;
export const NUD_REACHABLE = 0x02;
export const NUD_STALE = 0x04;
export const NUD_DELAY = 0x08;
export const NUD_PROBE = 0x10;
export const NUD_FAILED = 0x20;
/** Pseudostates: never change, no address resolution; PERMANENT entries are never garbage-collected. */
export const NUD_NOARP = 0x40;
export const NUD_PERMANENT = 0x80;
