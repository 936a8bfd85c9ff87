/**
 * Constants of linux/netfilter/nfnetlink_log.h: nfnetlink_log, the NFLOG target's way to userspace
 * (the NETLINK_NETFILTER subsystem NFNL_SUBSYS_ULOG). A listener binds a group with a config command;
 * the kernel then sends each logged packet as one NFULNL_MSG_PACKET message.
 */

/** The subsystem: the high byte of the message type. */
export const NFNL_SUBSYS_ULOG = 4;

/** enum nfulnl_msg_types */
export const NFULNL_MSG_PACKET = 0;
export const NFULNL_MSG_CONFIG = 1;

/** enum nfulnl_attr_type: attributes of a packet message. */
export const NFULA_PACKET_HDR = 1;
export const NFULA_MARK = 2;
export const NFULA_TIMESTAMP = 3;
export const NFULA_IFINDEX_INDEV = 4;
export const NFULA_IFINDEX_OUTDEV = 5;
export const NFULA_IFINDEX_PHYSINDEV = 6;
export const NFULA_IFINDEX_PHYSOUTDEV = 7;
export const NFULA_HWADDR = 8;
export const NFULA_PAYLOAD = 9;
export const NFULA_PREFIX = 10;

/** struct nfulnl_msg_packet_hdr: __be16 hw_protocol, u8 hook, u8 _pad. */
export const NFULNL_MSG_PACKET_HDR_LEN = 4;

/** enum nfulnl_attr_config: attributes of a config message. */
export const NFULA_CFG_CMD = 1;
export const NFULA_CFG_MODE = 2;
export const NFULA_CFG_NLBUFSIZ = 3;
export const NFULA_CFG_TIMEOUT = 4;
export const NFULA_CFG_QTHRESH = 5;
export const NFULA_CFG_FLAGS = 6;

/** enum nfulnl_msg_config_cmds: struct nfulnl_msg_config_cmd is one u8. */
export const NFULNL_CFG_CMD_BIND = 1;
export const NFULNL_CFG_CMD_UNBIND = 2;

/** Copy modes of struct nfulnl_msg_config_mode: __be32 copy_range, u8 copy_mode, u8 _pad. */
export const NFULNL_COPY_NONE = 0;
export const NFULNL_COPY_META = 1;
export const NFULNL_COPY_PACKET = 2;
