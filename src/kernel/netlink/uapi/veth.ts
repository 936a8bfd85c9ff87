/** Constants of linux/veth.h: the nest inside IFLA_INFO_DATA of a veth link. */

export const VETH_INFO_UNSPEC = 0;
/** Payload: a struct ifinfomsg for the peer, followed by the peer's IFLA_* attributes. */
export const VETH_INFO_PEER = 1;
