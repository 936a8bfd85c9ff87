/**
 * Constants of linux/netfilter/nfnetlink.h and linux/netfilter.h: the NETLINK_NETFILTER protocol,
 * struct nfgenmsg, and the batch messages that wrap nf_tables changes into one transaction.
 */

export const NETLINK_NETFILTER = 12;

/** nfgenmsg.version */
export const NFNETLINK_V0 = 0;

/** Subsystems: the high byte of a message type. */
export const NFNL_SUBSYS_NFTABLES = 10;

/** A batch: BEGIN (res_id = the subsystem), the subsystem's messages, END; committed all or none. */
export const NFNL_MSG_BATCH_BEGIN = 0x10;
export const NFNL_MSG_BATCH_END = 0x11;

/** struct nfgenmsg: u8 nfgen_family, u8 version, __be16 res_id. */
export const NFGENMSG_LEN = 4;

/** enum nfproto (linux/netfilter.h): nfgen_family of nf_tables messages. */
export const NFPROTO_UNSPEC = 0;
export const NFPROTO_INET = 1;
export const NFPROTO_IPV4 = 2;
export const NFPROTO_ARP = 3;
export const NFPROTO_NETDEV = 5;
export const NFPROTO_BRIDGE = 7;
export const NFPROTO_IPV6 = 10;
