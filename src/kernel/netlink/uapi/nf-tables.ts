/**
 * Constants of linux/netfilter/nf_tables.h: the message types and the attributes of set elements and
 * stateful objects (counters), the parts of nf_tables podwire speaks over netlink itself.
 */

/** enum nf_tables_msg_types; on the wire: (NFNL_SUBSYS_NFTABLES << 8) | type. */
export const NFT_MSG_NEWTABLE = 0;
export const NFT_MSG_GETTABLE = 1;
export const NFT_MSG_DELTABLE = 2;
export const NFT_MSG_NEWSET = 9;
export const NFT_MSG_GETSET = 10;
export const NFT_MSG_NEWSETELEM = 12;
export const NFT_MSG_GETSETELEM = 13;
export const NFT_MSG_DELSETELEM = 14;
export const NFT_MSG_NEWOBJ = 18;
export const NFT_MSG_GETOBJ = 19;

/** enum nft_list_attributes */
export const NFTA_LIST_ELEM = 1;

/** enum nft_set_elem_list_attributes */
export const NFTA_SET_ELEM_LIST_TABLE = 1;
export const NFTA_SET_ELEM_LIST_SET = 2;
export const NFTA_SET_ELEM_LIST_ELEMENTS = 3;

/** enum nft_set_elem_attributes */
export const NFTA_SET_ELEM_KEY = 1;
export const NFTA_SET_ELEM_DATA = 2;
export const NFTA_SET_ELEM_FLAGS = 3;
export const NFTA_SET_ELEM_EXPR = 7;
/** The end of a range (inclusive) in a set of concatenated intervals. */
export const NFTA_SET_ELEM_KEY_END = 10;
export const NFTA_SET_ELEM_EXPRESSIONS = 11;

/** enum nft_expr_attributes */
export const NFTA_EXPR_NAME = 1;
export const NFTA_EXPR_DATA = 2;

/** enum nft_data_attributes */
export const NFTA_DATA_VALUE = 1;
export const NFTA_DATA_VERDICT = 2;

/** enum nft_object_attributes */
export const NFTA_OBJ_TABLE = 1;
export const NFTA_OBJ_NAME = 2;
export const NFTA_OBJ_TYPE = 3;
export const NFTA_OBJ_DATA = 4;

/** NFT_OBJECT_* */
export const NFT_OBJECT_COUNTER = 1;

/** enum nft_counter_attributes: both __be64. */
export const NFTA_COUNTER_BYTES = 1;
export const NFTA_COUNTER_PACKETS = 2;

/** A key component is padded to a whole number of 32-bit registers (NFT_REG32_SIZE). */
export const NFT_REG32_SIZE = 4;

/** IFNAMSIZ: `meta iifname` loads the whole zero-padded name. */
export const IFNAMSIZ = 16;

const NAMES = new Map<number, string>([
  [NFT_MSG_NEWTABLE, 'NFT_MSG_NEWTABLE'],
  [NFT_MSG_GETTABLE, 'NFT_MSG_GETTABLE'],
  [NFT_MSG_DELTABLE, 'NFT_MSG_DELTABLE'],
  [NFT_MSG_NEWSET, 'NFT_MSG_NEWSET'],
  [NFT_MSG_GETSET, 'NFT_MSG_GETSET'],
  [NFT_MSG_NEWSETELEM, 'NFT_MSG_NEWSETELEM'],
  [NFT_MSG_GETSETELEM, 'NFT_MSG_GETSETELEM'],
  [NFT_MSG_DELSETELEM, 'NFT_MSG_DELSETELEM'],
  [NFT_MSG_NEWOBJ, 'NFT_MSG_NEWOBJ'],
  [NFT_MSG_GETOBJ, 'NFT_MSG_GETOBJ'],
]);

/** The kernel's name of an nf_tables message type, used as the `syscall` of a KernelError. */
export function nftMsgName(type: number): string {
  return NAMES.get(type & 0xff) ?? `NFT_MSG_${type & 0xff}`;
}
