/**
 * RTM_NEWADDR / RTM_DELADDR / RTM_GETADDR bodies: struct ifaddrmsg followed by IFA_* attributes; and
 * the `Addr` view of a decoded body.
 */

import { formatIpBytes } from '../../base/ip.js';
import {
  type AttrCodec,
  type AttrSchema,
  bytes,
  cstring,
  decodeAttributes,
  decodeWithSchema,
  encodeAttributes,
  encodeWithSchema,
  u8,
  u32,
  u32Struct,
} from './attributes.js';
import { concatBytes, dataView, HOST_LITTLE_ENDIAN } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import type { Addr } from './types.js';
import * as A from './uapi/if-addr.js';

/** struct ifaddrmsg: 8 bytes (family u8, prefixlen u8, flags u8, scope u8, index u32). */
export interface IfAddrMsg {
  family: number;
  prefixlen: number;
  /** The low 8 bits of the flags; IFA_FLAGS carries all 32. */
  flags: number;
  scope: number;
  index: number;
}

export const IFADDRMSG_LEN = 8;

export function encodeIfAddrMsg(m: IfAddrMsg): Uint8Array {
  const out = new Uint8Array(IFADDRMSG_LEN);
  const v = dataView(out);
  v.setUint8(0, m.family);
  v.setUint8(1, m.prefixlen);
  v.setUint8(2, m.flags);
  v.setUint8(3, m.scope);
  v.setUint32(4, m.index, HOST_LITTLE_ENDIAN);
  return out;
}

export function decodeIfAddrMsg(payload: Uint8Array): IfAddrMsg {
  if (payload.length < IFADDRMSG_LEN)
    throw new NetlinkProtocolError(`ifaddrmsg needs 8 bytes, got ${payload.length}`);
  const v = dataView(payload);
  return {
    family: v.getUint8(0),
    prefixlen: v.getUint8(1),
    flags: v.getUint8(2),
    scope: v.getUint8(3),
    index: v.getUint32(4, HOST_LITTLE_ENDIAN),
  };
}

/** struct ifa_cacheinfo: lifetimes in seconds (0xffffffff = forever), stamps in hundredths of a second. */
export interface IfaCacheinfo {
  preferred: number;
  valid: number;
  cstamp: number;
  tstamp: number;
}

const cacheinfo: AttrCodec<IfaCacheinfo> = u32Struct(['preferred', 'valid', 'cstamp', 'tstamp'] as const);

export interface AddrAttributes {
  address?: Uint8Array;
  local?: Uint8Array;
  label?: string;
  broadcast?: Uint8Array;
  cacheinfo?: IfaCacheinfo;
  flags?: number;
  rtPriority?: number;
  proto?: number;
}

const ADDR_SCHEMA: AttrSchema<AddrAttributes> = {
  address: { type: A.IFA_ADDRESS, codec: bytes },
  local: { type: A.IFA_LOCAL, codec: bytes },
  label: { type: A.IFA_LABEL, codec: cstring },
  broadcast: { type: A.IFA_BROADCAST, codec: bytes },
  cacheinfo: { type: A.IFA_CACHEINFO, codec: cacheinfo },
  flags: { type: A.IFA_FLAGS, codec: u32 },
  rtPriority: { type: A.IFA_RT_PRIORITY, codec: u32 },
  proto: { type: A.IFA_PROTO, codec: u8 },
};

export interface AddrBody {
  ifa: IfAddrMsg;
  attrs: AddrAttributes;
}

export function encodeAddrBody(body: AddrBody): Uint8Array {
  return concatBytes([
    encodeIfAddrMsg(body.ifa),
    encodeAttributes(encodeWithSchema(ADDR_SCHEMA, body.attrs)),
  ]);
}

export function decodeAddrBody(payload: Uint8Array): AddrBody {
  const ifa = decodeIfAddrMsg(payload);
  return { ifa, attrs: decodeWithSchema(ADDR_SCHEMA, decodeAttributes(payload.subarray(IFADDRMSG_LEN))) };
}

/** The `Addr` view of an RTM_NEWADDR body. */
export function addrFromBody(body: AddrBody): Addr {
  const { ifa, attrs } = body;
  const local = attrs.local ?? attrs.address;
  if (local === undefined) throw new NetlinkProtocolError(`RTM_NEWADDR on index ${ifa.index} has no address`);
  const addr: Addr = {
    index: ifa.index,
    family: ifa.family,
    address: formatIpBytes(local),
    prefixLength: ifa.prefixlen,
    flags: attrs.flags ?? ifa.flags,
    scope: ifa.scope,
  };
  if (attrs.label !== undefined) addr.label = attrs.label;
  return addr;
}
