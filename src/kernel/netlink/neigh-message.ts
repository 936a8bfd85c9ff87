/**
 * RTM_NEWNEIGH / RTM_DELNEIGH / RTM_GETNEIGH bodies: struct ndmsg followed by NDA_* attributes; and
 * the `Neigh` (ARP/NDP) and `FdbEntry` (AF_BRIDGE) views of a decoded body.
 */

import { formatIpBytes } from '../../base/ip.js';
import { formatMac } from '../../base/mac.js';
import {
  type AttrCodec,
  type AttrSchema,
  be16,
  bytes,
  decodeAttributes,
  decodeWithSchema,
  encodeAttributes,
  encodeWithSchema,
  i32,
  u8,
  u16,
  u32,
  u32Struct,
} from './attributes.js';
import { concatBytes, dataView, HOST_LITTLE_ENDIAN } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import type { FdbEntry, Neigh } from './types.js';
import * as N from './uapi/neighbour.js';

/** struct ndmsg: 12 bytes (family u8, 3 pad bytes, ifindex s32, state u16, flags u8, type u8). */
export interface NdMsg {
  family: number;
  index: number;
  /** NUD_* */
  state: number;
  /** NTF_* */
  flags: number;
  /** RTN_* of the address (unicast, multicast, ...). */
  type: number;
}

export const NDMSG_LEN = 12;

export function encodeNdMsg(m: NdMsg): Uint8Array {
  const out = new Uint8Array(NDMSG_LEN);
  const v = dataView(out);
  v.setUint8(0, m.family);
  v.setInt32(4, m.index, HOST_LITTLE_ENDIAN);
  v.setUint16(8, m.state, HOST_LITTLE_ENDIAN);
  v.setUint8(10, m.flags);
  v.setUint8(11, m.type);
  return out;
}

export function decodeNdMsg(payload: Uint8Array): NdMsg {
  if (payload.length < NDMSG_LEN)
    throw new NetlinkProtocolError(`ndmsg needs 12 bytes, got ${payload.length}`);
  const v = dataView(payload);
  return {
    family: v.getUint8(0),
    index: v.getInt32(4, HOST_LITTLE_ENDIAN),
    state: v.getUint16(8, HOST_LITTLE_ENDIAN),
    flags: v.getUint8(10),
    type: v.getUint8(11),
  };
}

/** An ndmsg with every field zero except those given. */
export function ndMsg(fields: Partial<NdMsg> = {}): NdMsg {
  return { family: 0, index: 0, state: 0, flags: 0, type: 0, ...fields };
}

/** struct nda_cacheinfo: ages in clock ticks since the entry was confirmed, used, updated. */
export interface NdaCacheinfo {
  confirmed: number;
  used: number;
  updated: number;
  refcnt: number;
}

const cacheinfo: AttrCodec<NdaCacheinfo> = u32Struct(['confirmed', 'used', 'updated', 'refcnt'] as const);

/** The NDA_* attributes podwire reads or writes; others are skipped when decoding. */
export interface NeighAttributes {
  dst?: Uint8Array;
  lladdr?: Uint8Array;
  cacheinfo?: NdaCacheinfo;
  probes?: number;
  vlan?: number;
  port?: number;
  vni?: number;
  ifindex?: number;
  master?: number;
  linkNetnsid?: number;
  srcVni?: number;
  protocol?: number;
  nhId?: number;
  flagsExt?: number;
}

const NEIGH_SCHEMA: AttrSchema<NeighAttributes> = {
  dst: { type: N.NDA_DST, codec: bytes },
  lladdr: { type: N.NDA_LLADDR, codec: bytes },
  cacheinfo: { type: N.NDA_CACHEINFO, codec: cacheinfo },
  probes: { type: N.NDA_PROBES, codec: u32 },
  vlan: { type: N.NDA_VLAN, codec: u16 },
  port: { type: N.NDA_PORT, codec: be16 },
  vni: { type: N.NDA_VNI, codec: u32 },
  ifindex: { type: N.NDA_IFINDEX, codec: u32 },
  master: { type: N.NDA_MASTER, codec: u32 },
  linkNetnsid: { type: N.NDA_LINK_NETNSID, codec: i32 },
  srcVni: { type: N.NDA_SRC_VNI, codec: u32 },
  protocol: { type: N.NDA_PROTOCOL, codec: u8 },
  nhId: { type: N.NDA_NH_ID, codec: u32 },
  flagsExt: { type: N.NDA_FLAGS_EXT, codec: u32 },
};

export interface NeighBody {
  ndm: NdMsg;
  attrs: NeighAttributes;
}

export function encodeNeighBody(body: NeighBody): Uint8Array {
  return concatBytes([encodeNdMsg(body.ndm), encodeAttributes(encodeWithSchema(NEIGH_SCHEMA, body.attrs))]);
}

export function decodeNeighBody(payload: Uint8Array): NeighBody {
  const ndm = decodeNdMsg(payload);
  return { ndm, attrs: decodeWithSchema(NEIGH_SCHEMA, decodeAttributes(payload.subarray(NDMSG_LEN))) };
}

/** The `Neigh` view of an RTM_NEWNEIGH body of family AF_INET or AF_INET6. */
export function neighFromBody(body: NeighBody): Neigh {
  const { ndm, attrs } = body;
  if (attrs.dst === undefined)
    throw new NetlinkProtocolError(`RTM_NEWNEIGH on index ${ndm.index} has no NDA_DST`);
  const neigh: Neigh = {
    index: ndm.index,
    family: ndm.family,
    address: formatIpBytes(attrs.dst),
    state: ndm.state,
    flags: ndm.flags,
  };
  if (attrs.lladdr !== undefined && attrs.lladdr.length > 0) neigh.mac = formatMac(attrs.lladdr);
  return neigh;
}

/** The `FdbEntry` view of an RTM_NEWNEIGH body of family AF_BRIDGE. */
export function fdbFromBody(body: NeighBody): FdbEntry {
  const { ndm, attrs } = body;
  if (attrs.lladdr === undefined)
    throw new NetlinkProtocolError(`AF_BRIDGE RTM_NEWNEIGH on index ${ndm.index} has no NDA_LLADDR`);
  const entry: FdbEntry = {
    index: ndm.index,
    mac: formatMac(attrs.lladdr),
    state: ndm.state,
    flags: ndm.flags,
  };
  if (attrs.dst !== undefined) entry.dst = formatIpBytes(attrs.dst);
  if (attrs.vni !== undefined) entry.vni = attrs.vni;
  if (attrs.port !== undefined) entry.port = attrs.port;
  if (attrs.vlan !== undefined) entry.vlan = attrs.vlan;
  if (attrs.master !== undefined) entry.master = attrs.master;
  return entry;
}
