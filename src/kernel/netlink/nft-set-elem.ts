/**
 * The codec of nf_tables set elements and counter objects (linux/netfilter/nf_tables.h): a set element
 * list names its table and set and nests NFTA_LIST_ELEM entries, each holding NFTA_SET_ELEM_KEY with the
 * key bytes in NFTA_DATA_VALUE. A concatenated key (`a . b . c` in nft) is its components one after
 * another, each padded with zeros to a whole number of 32-bit registers.
 */
import {
  attrType,
  cstring,
  decodeAttributes,
  encodeAttributes,
  findAttr,
  type RtAttr,
} from './attributes.js';
import { concatBytes } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import { NLA_F_NESTED } from './uapi/netlink.js';
import {
  IFNAMSIZ,
  NFT_REG32_SIZE,
  NFTA_COUNTER_BYTES,
  NFTA_COUNTER_PACKETS,
  NFTA_DATA_VALUE,
  NFTA_EXPR_DATA,
  NFTA_EXPR_NAME,
  NFTA_LIST_ELEM,
  NFTA_OBJ_DATA,
  NFTA_OBJ_NAME,
  NFTA_OBJ_TABLE,
  NFTA_OBJ_TYPE,
  NFTA_SET_ELEM_EXPR,
  NFTA_SET_ELEM_EXPRESSIONS,
  NFTA_SET_ELEM_KEY,
  NFTA_SET_ELEM_KEY_END,
  NFTA_SET_ELEM_LIST_ELEMENTS,
  NFTA_SET_ELEM_LIST_SET,
  NFTA_SET_ELEM_LIST_TABLE,
} from './uapi/nf-tables.js';

/** A concatenated key: each component zero-padded to a multiple of 4 bytes. */
export function concatKey(parts: readonly Uint8Array[]): Uint8Array {
  return concatBytes(
    parts.map((p) => {
      const padded = new Uint8Array(Math.ceil(p.length / NFT_REG32_SIZE) * NFT_REG32_SIZE);
      padded.set(p);
      return padded;
    }),
  );
}

/** An interface name as `meta iifname` loads it: IFNAMSIZ bytes, zero-padded. */
export function ifnameKey(name: string): Uint8Array {
  const text = Buffer.from(name, 'utf8');
  if (text.length >= IFNAMSIZ) throw new NetlinkProtocolError(`interface name ${name} is too long`);
  const out = new Uint8Array(IFNAMSIZ);
  out.set(text);
  return out;
}

const nest = (type: number, attrs: RtAttr[]): RtAttr => ({
  type: type | NLA_F_NESTED,
  value: encodeAttributes(attrs),
});

/** The attributes of NFT_MSG_{NEW,DEL,GET}SETELEM for these keys (none: the whole set, for a dump). */
export function encodeSetElemList(table: string, set: string, keys: readonly Uint8Array[]): Uint8Array {
  const attrs: RtAttr[] = [
    { type: NFTA_SET_ELEM_LIST_TABLE, value: cstring.encode(table) },
    { type: NFTA_SET_ELEM_LIST_SET, value: cstring.encode(set) },
  ];
  if (keys.length > 0) {
    attrs.push(
      nest(
        NFTA_SET_ELEM_LIST_ELEMENTS,
        keys.map((k) =>
          nest(NFTA_LIST_ELEM, [nest(NFTA_SET_ELEM_KEY, [{ type: NFTA_DATA_VALUE, value: k }])]),
        ),
      ),
    );
  }
  return encodeAttributes(attrs);
}

/** The keys of one NFT_MSG_NEWSETELEM message (a dump's or a GET's answer), copied out. */
export function decodeSetElemKeys(attrs: Uint8Array): { set: string; keys: Uint8Array[] } {
  const top = decodeAttributes(attrs);
  const set = findAttr(top, NFTA_SET_ELEM_LIST_SET);
  const list = findAttr(top, NFTA_SET_ELEM_LIST_ELEMENTS);
  const keys: Uint8Array[] = [];
  for (const elem of list ? decodeAttributes(list.value) : []) {
    if (attrType(elem) !== NFTA_LIST_ELEM) continue;
    const key = findAttr(decodeAttributes(elem.value), NFTA_SET_ELEM_KEY);
    const value = key && findAttr(decodeAttributes(key.value), NFTA_DATA_VALUE);
    if (value) keys.push(new Uint8Array(value.value));
  }
  return { set: set ? cstring.decode(set.value, NFTA_SET_ELEM_LIST_SET) : '', keys };
}

/** The attributes of an NFT_MSG_GETOBJ dump of one table's objects of one type. */
export function encodeObjDump(table: string, objType: number): Uint8Array {
  return encodeAttributes([
    { type: NFTA_OBJ_TABLE, value: cstring.encode(table) },
    { type: NFTA_OBJ_TYPE, value: u32be(objType) },
  ]);
}

function u32be(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n, false);
  return out;
}

function be64(b: Uint8Array | undefined): bigint {
  if (!b) return 0n;
  if (b.length !== 8) throw new NetlinkProtocolError(`counter attribute of ${b.length} bytes, expected 8`);
  return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, false);
}

export interface NftCounter {
  table: string;
  name: string;
  packets: bigint;
  bytes: bigint;
}

/** One counter object of a GETOBJ answer (NFTA_OBJ_TYPE is __be32, NFTA_COUNTER_* __be64). */
export function decodeCounterObj(attrs: Uint8Array): NftCounter | undefined {
  const top = decodeAttributes(attrs);
  const name = findAttr(top, NFTA_OBJ_NAME);
  const table = findAttr(top, NFTA_OBJ_TABLE);
  const data = findAttr(top, NFTA_OBJ_DATA);
  if (!name || !table || !data) return undefined;
  const d = decodeAttributes(data.value);
  return {
    table: cstring.decode(table.value, NFTA_OBJ_TABLE),
    name: cstring.decode(name.value, NFTA_OBJ_NAME),
    packets: be64(findAttr(d, NFTA_COUNTER_PACKETS)?.value),
    bytes: be64(findAttr(d, NFTA_COUNTER_BYTES)?.value),
  };
}

/** One element of a set: a key, or (a set of concatenated intervals) a range `key`-`keyEnd`, inclusive. */
export interface SetElem {
  key: Uint8Array;
  keyEnd?: Uint8Array;
}

/** An element as a dump returns it, with the packets and bytes of its counter when the set has one. */
export interface CountedSetElem extends SetElem {
  packets?: bigint;
  bytes?: bigint;
}

/** The attributes of NFT_MSG_{NEW,DEL}SETELEM for these elements, ranges included. */
export function encodeSetElemRanges(table: string, set: string, elems: readonly SetElem[]): Uint8Array {
  return encodeAttributes([
    { type: NFTA_SET_ELEM_LIST_TABLE, value: cstring.encode(table) },
    { type: NFTA_SET_ELEM_LIST_SET, value: cstring.encode(set) },
    nest(
      NFTA_SET_ELEM_LIST_ELEMENTS,
      elems.map((e) =>
        nest(NFTA_LIST_ELEM, [
          nest(NFTA_SET_ELEM_KEY, [{ type: NFTA_DATA_VALUE, value: e.key }]),
          ...(e.keyEnd ? [nest(NFTA_SET_ELEM_KEY_END, [{ type: NFTA_DATA_VALUE, value: e.keyEnd }])] : []),
        ]),
      ),
    ),
  ]);
}

function dataValue(attr: RtAttr | undefined): Uint8Array | undefined {
  const v = attr && findAttr(decodeAttributes(attr.value), NFTA_DATA_VALUE);
  return v ? new Uint8Array(v.value) : undefined;
}

/** The `counter` expression among an element's expressions (NFTA_SET_ELEM_EXPR or _EXPRESSIONS). */
function elemCounter(attrs: readonly RtAttr[]): { packets: bigint; bytes: bigint } | undefined {
  const exprs: RtAttr[] = [];
  const one = findAttr(attrs, NFTA_SET_ELEM_EXPR);
  if (one) exprs.push(one);
  const many = findAttr(attrs, NFTA_SET_ELEM_EXPRESSIONS);
  if (many) exprs.push(...decodeAttributes(many.value).filter((a) => attrType(a) === NFTA_LIST_ELEM));
  for (const e of exprs) {
    const parts = decodeAttributes(e.value);
    const name = findAttr(parts, NFTA_EXPR_NAME);
    const data = findAttr(parts, NFTA_EXPR_DATA);
    if (!name || !data || cstring.decode(name.value, NFTA_EXPR_NAME) !== 'counter') continue;
    const d = decodeAttributes(data.value);
    return {
      packets: be64(findAttr(d, NFTA_COUNTER_PACKETS)?.value),
      bytes: be64(findAttr(d, NFTA_COUNTER_BYTES)?.value),
    };
  }
  return undefined;
}

/** The elements of one NFT_MSG_NEWSETELEM message of a dump: keys, range ends and counters, copied out. */
export function decodeSetElems(attrs: Uint8Array): CountedSetElem[] {
  const list = findAttr(decodeAttributes(attrs), NFTA_SET_ELEM_LIST_ELEMENTS);
  const out: CountedSetElem[] = [];
  for (const elem of list ? decodeAttributes(list.value) : []) {
    if (attrType(elem) !== NFTA_LIST_ELEM) continue;
    const a = decodeAttributes(elem.value);
    const key = dataValue(findAttr(a, NFTA_SET_ELEM_KEY));
    if (!key) continue;
    const keyEnd = dataValue(findAttr(a, NFTA_SET_ELEM_KEY_END));
    out.push({ key, ...(keyEnd ? { keyEnd } : {}), ...elemCounter(a) });
  }
  return out;
}
