/**
 * RTM_NEWLINK / RTM_DELLINK / RTM_GETLINK / RTM_SETLINK bodies: struct ifinfomsg followed by IFLA_*
 * attributes; and the `Link` view of a decoded body.
 */

import { formatMac } from '../../base/mac.js';
import {
  type AttrSchema,
  attrList,
  attrType,
  bytes,
  cstring,
  decodeAttributes,
  decodeWithSchema,
  encodeAttributes,
  encodeWithSchema,
  i32,
  type RtAttr,
  u8,
  u32,
} from './attributes.js';
import { concatBytes, dataView, HOST_LITTLE_ENDIAN } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import type { Link } from './types.js';
import { IFF_UP } from './uapi/if.js';
import * as L from './uapi/if-link.js';
import { NLA_F_NESTED } from './uapi/netlink.js';
import { VETH_INFO_PEER } from './uapi/veth.js';
import { vxlanFromData } from './vxlan-data.js';

/** struct ifinfomsg: 16 bytes (family u8, pad u8, type u16, index s32, flags u32, change u32). */
export interface IfInfoMsg {
  family: number;
  /** ARPHRD_* device type. */
  type: number;
  index: number;
  flags: number;
  /** Which bits of `flags` a SETLINK changes. */
  change: number;
}

export const IFINFOMSG_LEN = 16;

export function encodeIfInfoMsg(m: IfInfoMsg): Uint8Array {
  const out = new Uint8Array(IFINFOMSG_LEN);
  const v = dataView(out);
  v.setUint8(0, m.family);
  v.setUint16(2, m.type, HOST_LITTLE_ENDIAN);
  v.setInt32(4, m.index, HOST_LITTLE_ENDIAN);
  v.setUint32(8, m.flags, HOST_LITTLE_ENDIAN);
  v.setUint32(12, m.change, HOST_LITTLE_ENDIAN);
  return out;
}

export function decodeIfInfoMsg(payload: Uint8Array): IfInfoMsg {
  if (payload.length < IFINFOMSG_LEN)
    throw new NetlinkProtocolError(`ifinfomsg needs 16 bytes, got ${payload.length}`);
  const v = dataView(payload);
  return {
    family: v.getUint8(0),
    type: v.getUint16(2, HOST_LITTLE_ENDIAN),
    index: v.getInt32(4, HOST_LITTLE_ENDIAN),
    flags: v.getUint32(8, HOST_LITTLE_ENDIAN),
    change: v.getUint32(12, HOST_LITTLE_ENDIAN),
  };
}

/** The IFLA_* attributes podwire reads or writes; others are skipped when decoding. */
export interface LinkAttributes {
  address?: Uint8Array;
  broadcast?: Uint8Array;
  ifname?: string;
  /** IFLA_IFALIAS: free text an operator (or podwire) attaches to a link; `ip link` prints it as `alias`. */
  ifalias?: string;
  mtu?: number;
  link?: number;
  master?: number;
  txqlen?: number;
  operstate?: number;
  linkmode?: number;
  linkinfo?: LinkInfo;
  netNsPid?: number;
  group?: number;
  netNsFd?: number;
  extMask?: number;
  promiscuity?: number;
  carrier?: number;
  linkNetnsid?: number;
  minMtu?: number;
  maxMtu?: number;
  /** IFLA_PROTINFO in its binary form (a bridge port's BR_STATE_*); only sent, with family AF_BRIDGE. */
  protinfoState?: number;
}

/** IFLA_LINKINFO. For kind 'veth' the data nest is typed as `peer`; other kinds keep raw `data`. */
export interface LinkInfo {
  kind?: string;
  data?: RtAttr[];
  /** VETH_INFO_PEER: the peer's ifinfomsg and attributes (only sent; the kernel never reports it). */
  peer?: LinkBody;
  slaveKind?: string;
  slaveData?: RtAttr[];
}

/** A link message's payload: the fixed header and the attributes. */
export interface LinkBody {
  ifi: IfInfoMsg;
  attrs: LinkAttributes;
}

const LINKINFO_OTHER_SCHEMA: AttrSchema<Pick<LinkInfo, 'slaveKind' | 'slaveData'>> = {
  slaveKind: { type: L.IFLA_INFO_SLAVE_KIND, codec: cstring },
  slaveData: { type: L.IFLA_INFO_SLAVE_DATA, codec: attrList },
};

/** IFLA_INFO_DATA is interpreted by kind, so the LINKINFO nest has a hand-written codec. */
const linkInfoCodec = {
  nested: true,
  encode(info: LinkInfo): Uint8Array {
    const attrs: RtAttr[] = [];
    if (info.kind !== undefined) attrs.push({ type: L.IFLA_INFO_KIND, value: cstring.encode(info.kind) });
    if (info.peer !== undefined) {
      // The peer nest is an ifinfomsg followed by attributes, not a pure attribute list, so it
      // carries no NLA_F_NESTED (the kernel's veth policy reads it as a plain blob).
      const peer: RtAttr = { type: VETH_INFO_PEER, value: encodeLinkBody(info.peer) };
      attrs.push({ type: L.IFLA_INFO_DATA | NLA_F_NESTED, value: encodeAttributes([peer]) });
    } else if (info.data !== undefined) {
      attrs.push({ type: L.IFLA_INFO_DATA | NLA_F_NESTED, value: attrList.encode(info.data) });
    }
    attrs.push(...encodeWithSchema(LINKINFO_OTHER_SCHEMA, info));
    return encodeAttributes(attrs);
  },
  decode(b: Uint8Array): LinkInfo {
    const attrs = decodeAttributes(b);
    const info: LinkInfo = decodeWithSchema(LINKINFO_OTHER_SCHEMA, attrs);
    const kind = attrs.find((a) => attrType(a) === L.IFLA_INFO_KIND);
    if (kind !== undefined) info.kind = cstring.decode(kind.value, L.IFLA_INFO_KIND);
    const data = attrs.find((a) => attrType(a) === L.IFLA_INFO_DATA);
    if (data !== undefined) {
      const inner = attrList.decode(data.value, L.IFLA_INFO_DATA);
      const peer = inner[0];
      if (
        info.kind === 'veth' &&
        inner.length === 1 &&
        peer !== undefined &&
        attrType(peer) === VETH_INFO_PEER
      ) {
        info.peer = decodeLinkBody(peer.value);
      } else {
        info.data = inner;
      }
    }
    return info;
  },
};

const LINK_SCHEMA: AttrSchema<LinkAttributes> = {
  address: { type: L.IFLA_ADDRESS, codec: bytes },
  broadcast: { type: L.IFLA_BROADCAST, codec: bytes },
  ifname: { type: L.IFLA_IFNAME, codec: cstring },
  ifalias: { type: L.IFLA_IFALIAS, codec: cstring },
  mtu: { type: L.IFLA_MTU, codec: u32 },
  link: { type: L.IFLA_LINK, codec: u32 },
  master: { type: L.IFLA_MASTER, codec: u32 },
  txqlen: { type: L.IFLA_TXQLEN, codec: u32 },
  operstate: { type: L.IFLA_OPERSTATE, codec: u8 },
  linkmode: { type: L.IFLA_LINKMODE, codec: u8 },
  linkinfo: { type: L.IFLA_LINKINFO, codec: linkInfoCodec },
  netNsPid: { type: L.IFLA_NET_NS_PID, codec: u32 },
  group: { type: L.IFLA_GROUP, codec: u32 },
  netNsFd: { type: L.IFLA_NET_NS_FD, codec: u32 },
  extMask: { type: L.IFLA_EXT_MASK, codec: u32 },
  promiscuity: { type: L.IFLA_PROMISCUITY, codec: u32 },
  carrier: { type: L.IFLA_CARRIER, codec: u8 },
  linkNetnsid: { type: L.IFLA_LINK_NETNSID, codec: i32 },
  minMtu: { type: L.IFLA_MIN_MTU, codec: u32 },
  maxMtu: { type: L.IFLA_MAX_MTU, codec: u32 },
  protinfoState: { type: L.IFLA_PROTINFO, codec: u8 },
};

export function encodeLinkBody(body: LinkBody): Uint8Array {
  return concatBytes([
    encodeIfInfoMsg(body.ifi),
    encodeAttributes(encodeWithSchema(LINK_SCHEMA, body.attrs)),
  ]);
}

export function decodeLinkBody(payload: Uint8Array): LinkBody {
  const ifi = decodeIfInfoMsg(payload);
  return { ifi, attrs: decodeWithSchema(LINK_SCHEMA, decodeAttributes(payload.subarray(IFINFOMSG_LEN))) };
}

/** An ifinfomsg with every field zero except those given. */
export function ifInfoMsg(fields: Partial<IfInfoMsg> = {}): IfInfoMsg {
  return { family: 0, type: 0, index: 0, flags: 0, change: 0, ...fields };
}

/** The `Link` view of an RTM_NEWLINK body. */
export function linkFromBody(body: LinkBody): Link {
  const { ifi, attrs } = body;
  if (attrs.ifname === undefined)
    throw new NetlinkProtocolError(`RTM_NEWLINK for index ${ifi.index} has no IFLA_IFNAME`);
  const link: Link = {
    index: ifi.index,
    name: attrs.ifname,
    mtu: attrs.mtu ?? 0,
    flags: ifi.flags,
    up: (ifi.flags & IFF_UP) !== 0,
  };
  if (attrs.linkinfo?.kind !== undefined) link.kind = attrs.linkinfo.kind;
  if (attrs.address !== undefined) link.mac = formatMac(attrs.address);
  if (attrs.master !== undefined) link.masterIndex = attrs.master;
  if (attrs.ifalias !== undefined && attrs.ifalias !== '') link.alias = attrs.ifalias;
  if (attrs.group !== undefined) link.group = attrs.group;
  if (attrs.operstate !== undefined) link.operstate = L.operstateName(attrs.operstate);
  if (attrs.link !== undefined) link.linkIndex = attrs.link;
  if (attrs.linkinfo?.slaveKind === 'bridge') {
    const state = attrs.linkinfo.slaveData?.find((a) => attrType(a) === L.IFLA_BRPORT_STATE);
    if (state !== undefined && state.value.length >= 1) link.bridgePortState = state.value[0];
    const mode = attrs.linkinfo.slaveData?.find((a) => attrType(a) === L.IFLA_BRPORT_MODE);
    if (mode !== undefined && mode.value.length >= 1) link.bridgePortHairpin = mode.value[0] !== 0;
    const flood = attrs.linkinfo.slaveData?.find((a) => attrType(a) === L.IFLA_BRPORT_UNICAST_FLOOD);
    if (flood !== undefined && flood.value.length >= 1) link.bridgePortUnicastFlood = flood.value[0] !== 0;
  }
  if (attrs.linkNetnsid !== undefined) link.linkNetnsId = attrs.linkNetnsid;
  if (attrs.linkinfo?.kind === 'vxlan' && attrs.linkinfo.data !== undefined) {
    const vxlan = vxlanFromData(attrs.linkinfo.data);
    if (vxlan !== undefined) link.vxlan = vxlan;
  }
  return link;
}
