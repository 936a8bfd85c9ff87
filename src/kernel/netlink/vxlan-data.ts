/**
 * IFLA_INFO_DATA of a vxlan link (IFLA_VXLAN_*): its codec, the attributes of
 * `ip link add ... type vxlan`, and the `VxlanInfo` view of a reported link.
 */

import { formatIpBytes, parseIpBytes } from '../../base/ip.js';
import { parseMac } from '../../base/mac.js';
import {
  type AttrSchema,
  be16,
  bytes,
  decodeWithSchema,
  encodeWithSchema,
  type RtAttr,
  u8,
  u32,
} from './attributes.js';
import type { LinkAttributes } from './link-message.js';
import type { VxlanInfo, VxlanSpec } from './types.js';
import * as V from './uapi/vxlan.js';

/** The IFLA_VXLAN_* attributes podwire reads or writes; others are skipped when decoding. */
export interface VxlanAttributes {
  id?: number;
  group?: Uint8Array;
  link?: number;
  local?: Uint8Array;
  ttl?: number;
  tos?: number;
  learning?: number;
  ageing?: number;
  port?: number;
  group6?: Uint8Array;
  local6?: Uint8Array;
}

const VXLAN_SCHEMA: AttrSchema<VxlanAttributes> = {
  id: { type: V.IFLA_VXLAN_ID, codec: u32 },
  group: { type: V.IFLA_VXLAN_GROUP, codec: bytes },
  link: { type: V.IFLA_VXLAN_LINK, codec: u32 },
  local: { type: V.IFLA_VXLAN_LOCAL, codec: bytes },
  ttl: { type: V.IFLA_VXLAN_TTL, codec: u8 },
  tos: { type: V.IFLA_VXLAN_TOS, codec: u8 },
  learning: { type: V.IFLA_VXLAN_LEARNING, codec: u8 },
  ageing: { type: V.IFLA_VXLAN_AGEING, codec: u32 },
  port: { type: V.IFLA_VXLAN_PORT, codec: be16 },
  group6: { type: V.IFLA_VXLAN_GROUP6, codec: bytes },
  local6: { type: V.IFLA_VXLAN_LOCAL6, codec: bytes },
};

/** The IFLA_INFO_DATA nest's content (LinkInfo.data keeps it as raw attributes). */
export function encodeVxlanData(attrs: VxlanAttributes): RtAttr[] {
  return encodeWithSchema(VXLAN_SCHEMA, attrs);
}

export function decodeVxlanData(data: readonly RtAttr[]): VxlanAttributes {
  return decodeWithSchema(VXLAN_SCHEMA, data);
}

/** The link attributes of `ip link add NAME mtu M [address MAC] type vxlan id VNI dstport PORT ...`. */
export function vxlanLinkAttributes(spec: VxlanSpec): LinkAttributes {
  // The kernel's default is learning on; a flannel-style overlay programs every remote MAC itself.
  const data: VxlanAttributes = { id: spec.vni, port: spec.port, learning: spec.learning ? 1 : 0 };
  if (spec.underlayIndex !== undefined) data.link = spec.underlayIndex;
  if (spec.local !== undefined) {
    const local = parseIpBytes(spec.local);
    if (local.bytes.length === 4) data.local = local.bytes;
    else data.local6 = local.bytes;
  }
  const attrs: LinkAttributes = {
    ifname: spec.name,
    mtu: spec.mtu,
    linkinfo: { kind: 'vxlan', data: encodeVxlanData(data) },
  };
  if (spec.mac !== undefined) attrs.address = Uint8Array.from(parseMac(spec.mac));
  return attrs;
}

/** The `VxlanInfo` of a vxlan link's IFLA_INFO_DATA; undefined if the kernel left out the id or port. */
export function vxlanFromData(data: readonly RtAttr[]): VxlanInfo | undefined {
  const attrs = decodeVxlanData(data);
  if (attrs.id === undefined || attrs.port === undefined) return undefined;
  const info: VxlanInfo = { vni: attrs.id, port: attrs.port, learning: attrs.learning !== 0 };
  // The kernel reports LOCAL/LOCAL6 only when set, LINK only when non-zero.
  const local = attrs.local ?? attrs.local6;
  if (local !== undefined) info.local = formatIpBytes(local);
  if (attrs.link !== undefined) info.underlayIndex = attrs.link;
  return info;
}
