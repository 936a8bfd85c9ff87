/**
 * RTM_NEWROUTE / RTM_DELROUTE / RTM_GETROUTE bodies: struct rtmsg followed by RTA_* attributes; and
 * the `Route` view of a decoded body.
 */

import { formatIpBytes } from '../../base/ip.js';
import {
  type AttrSchema,
  attrList,
  bytes,
  decodeAttributes,
  decodeWithSchema,
  encodeAttributes,
  encodeWithSchema,
  type RtAttr,
  u8,
  u32,
} from './attributes.js';
import { concatBytes, dataView, HOST_LITTLE_ENDIAN } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import type { Route } from './types.js';
import * as R from './uapi/rtnetlink.js';

/** struct rtmsg: 12 bytes (eight u8 fields, then flags u32). */
export interface RtMsg {
  family: number;
  dstLen: number;
  srcLen: number;
  tos: number;
  /** RT_TABLE_*; a table id above 255 is reported as RT_TABLE_UNSPEC here and in full in RTA_TABLE. */
  table: number;
  protocol: number;
  scope: number;
  type: number;
  flags: number;
}

export const RTMSG_LEN = 12;

export function encodeRtMsg(m: RtMsg): Uint8Array {
  const out = new Uint8Array(RTMSG_LEN);
  const v = dataView(out);
  [m.family, m.dstLen, m.srcLen, m.tos, m.table, m.protocol, m.scope, m.type].forEach((n, i) => {
    v.setUint8(i, n);
  });
  v.setUint32(8, m.flags, HOST_LITTLE_ENDIAN);
  return out;
}

export function decodeRtMsg(payload: Uint8Array): RtMsg {
  if (payload.length < RTMSG_LEN)
    throw new NetlinkProtocolError(`rtmsg needs 12 bytes, got ${payload.length}`);
  const v = dataView(payload);
  return {
    family: v.getUint8(0),
    dstLen: v.getUint8(1),
    srcLen: v.getUint8(2),
    tos: v.getUint8(3),
    table: v.getUint8(4),
    protocol: v.getUint8(5),
    scope: v.getUint8(6),
    type: v.getUint8(7),
    flags: v.getUint32(8, HOST_LITTLE_ENDIAN),
  };
}

export interface RouteAttributes {
  dst?: Uint8Array;
  src?: Uint8Array;
  iif?: number;
  oif?: number;
  gateway?: Uint8Array;
  priority?: number;
  prefsrc?: Uint8Array;
  metrics?: RtAttr[];
  table?: number;
  pref?: number;
}

const ROUTE_SCHEMA: AttrSchema<RouteAttributes> = {
  dst: { type: R.RTA_DST, codec: bytes },
  src: { type: R.RTA_SRC, codec: bytes },
  iif: { type: R.RTA_IIF, codec: u32 },
  oif: { type: R.RTA_OIF, codec: u32 },
  gateway: { type: R.RTA_GATEWAY, codec: bytes },
  priority: { type: R.RTA_PRIORITY, codec: u32 },
  prefsrc: { type: R.RTA_PREFSRC, codec: bytes },
  metrics: { type: R.RTA_METRICS, codec: attrList },
  table: { type: R.RTA_TABLE, codec: u32 },
  pref: { type: R.RTA_PREF, codec: u8 },
};

export interface RouteBody {
  rtm: RtMsg;
  attrs: RouteAttributes;
}

export function encodeRouteBody(body: RouteBody): Uint8Array {
  return concatBytes([encodeRtMsg(body.rtm), encodeAttributes(encodeWithSchema(ROUTE_SCHEMA, body.attrs))]);
}

export function decodeRouteBody(payload: Uint8Array): RouteBody {
  const rtm = decodeRtMsg(payload);
  return { rtm, attrs: decodeWithSchema(ROUTE_SCHEMA, decodeAttributes(payload.subarray(RTMSG_LEN))) };
}

/** An rtmsg with every field zero except those given. */
export function rtMsg(fields: Partial<RtMsg> = {}): RtMsg {
  return {
    family: 0,
    dstLen: 0,
    srcLen: 0,
    tos: 0,
    table: 0,
    protocol: 0,
    scope: 0,
    type: 0,
    flags: 0,
    ...fields,
  };
}

/** The `Route` view of an RTM_NEWROUTE body. */
export function routeFromBody(body: RouteBody): Route {
  const { rtm, attrs } = body;
  const route: Route = {
    family: rtm.family,
    table: attrs.table ?? rtm.table,
    protocol: rtm.protocol,
    scope: rtm.scope,
    type: rtm.type,
    flags: rtm.flags,
  };
  if (rtm.dstLen > 0) {
    if (attrs.dst === undefined)
      throw new NetlinkProtocolError(`route with dst_len ${rtm.dstLen} has no RTA_DST`);
    route.dst = `${formatIpBytes(attrs.dst)}/${rtm.dstLen}`;
  }
  if (attrs.gateway !== undefined) route.gateway = formatIpBytes(attrs.gateway);
  if (attrs.oif !== undefined) route.oif = attrs.oif;
  if (attrs.priority !== undefined) route.priority = attrs.priority;
  if (attrs.prefsrc !== undefined) route.prefsrc = formatIpBytes(attrs.prefsrc);
  return route;
}
