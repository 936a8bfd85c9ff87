/**
 * Constants of linux/netlink.h (see netlink(7)). Names are the kernel's, so this file reads beside
 * the header.
 */

export const NETLINK_ROUTE = 0;

/** Socket options at level SOL_NETLINK. */
export const NETLINK_CAP_ACK = 10;
export const NETLINK_EXT_ACK = 11;

/** struct nlmsghdr is 16 bytes; every message and attribute starts on a 4-byte boundary. */
export const NLMSG_HDRLEN = 16;
export const NLMSG_ALIGNTO = 4;

export function NLMSG_ALIGN(len: number): number {
  return (len + NLMSG_ALIGNTO - 1) & ~(NLMSG_ALIGNTO - 1);
}

/** Message types below NLMSG_MIN_TYPE are control messages. */
export const NLMSG_NOOP = 0x1;
export const NLMSG_ERROR = 0x2;
export const NLMSG_DONE = 0x3;
export const NLMSG_OVERRUN = 0x4;
export const NLMSG_MIN_TYPE = 0x10;

/** Flags of every message. */
export const NLM_F_REQUEST = 0x01;
export const NLM_F_MULTI = 0x02;
export const NLM_F_ACK = 0x04;
export const NLM_F_ECHO = 0x08;
export const NLM_F_DUMP_INTR = 0x10;
export const NLM_F_DUMP_FILTERED = 0x20;

/** Modifiers of GET requests. */
export const NLM_F_ROOT = 0x100;
export const NLM_F_MATCH = 0x200;
export const NLM_F_ATOMIC = 0x400;
export const NLM_F_DUMP = NLM_F_ROOT | NLM_F_MATCH;

/** Modifiers of NEW requests. */
export const NLM_F_REPLACE = 0x100;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;
export const NLM_F_APPEND = 0x800;

/** Flags of NLMSG_ERROR acks: the request's payload was left out / TLVs follow it. */
export const NLM_F_CAPPED = 0x100;
export const NLM_F_ACK_TLVS = 0x200;

/** Extended-ack attributes carried after struct nlmsgerr (enum nlmsgerr_attrs). */
export const NLMSGERR_ATTR_UNUSED = 0;
export const NLMSGERR_ATTR_MSG = 1;
export const NLMSGERR_ATTR_OFFS = 2;
export const NLMSGERR_ATTR_COOKIE = 3;
export const NLMSGERR_ATTR_POLICY = 4;
export const NLMSGERR_ATTR_MISS_TYPE = 5;
export const NLMSGERR_ATTR_MISS_NEST = 6;

/** struct nlattr / struct rtattr: a 4-byte header (u16 len, u16 type) and the type's two flag bits. */
export const NLA_HDRLEN = 4;
export const NLA_F_NESTED = 1 << 15;
export const NLA_F_NET_BYTEORDER = 1 << 14;
export const NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xffff;
