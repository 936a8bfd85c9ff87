/**
 * OXM TLVs (OpenFlow 1.3.5, 7.2.3 "Flow Match Field Structures"): the fields of a match and of
 * set_field. A TLV is a 32-bit header (class 16 bits, field 7, hasmask 1, length 8) followed by the
 * value and, with hasmask, a mask of the same size.
 *
 * Classes: OFPXMC_OPENFLOW_BASIC (0x8000), and the two Nicira classes OVS accepts in OpenFlow 1.2+
 * matches, set_field and NXAST_REG_MOVE: NXM_0 (0x0000, "NXM_OF_*": OpenFlow 1.0 fields) and NXM_1
 * (0x0001, "NXM_NX_*": registers, conntrack and the rest). OFPXMC_EXPERIMENTER (0xffff) TLVs carry a
 * 32-bit experimenter id after the header; they are decoded and kept, not interpreted.
 */
import { type CodecReader, pad8 } from './codec-reader.js';

export const OFPXMC = {
  NXM_0: 0x0000,
  NXM_1: 0x0001,
  OPENFLOW_BASIC: 0x8000,
  EXPERIMENTER: 0xffff,
} as const;

/** enum oxm_ofb_match_fields (the ones podwire uses, and their neighbours). */
export const OFPXMT_OFB = {
  IN_PORT: 0,
  METADATA: 2,
  ETH_DST: 3,
  ETH_SRC: 4,
  ETH_TYPE: 5,
  VLAN_VID: 6,
  VLAN_PCP: 7,
  IP_PROTO: 10,
  IPV4_SRC: 11,
  IPV4_DST: 12,
  TCP_SRC: 13,
  TCP_DST: 14,
  UDP_SRC: 15,
  UDP_DST: 16,
  SCTP_SRC: 17,
  SCTP_DST: 18,
  ICMPV4_TYPE: 19,
  ICMPV4_CODE: 20,
  ARP_OP: 21,
  ARP_SPA: 22,
  ARP_TPA: 23,
  ARP_SHA: 24,
  ARP_THA: 25,
  IPV6_SRC: 26,
  IPV6_DST: 27,
  ICMPV6_TYPE: 29,
  ICMPV6_CODE: 30,
  IPV6_ND_TARGET: 31,
  IPV6_ND_SLL: 32,
  IPV6_ND_TLL: 33,
} as const;

/** OFPVID_PRESENT: VLAN_VID's bit saying a tag is there (OpenFlow 1.3.5, 7.2.3.8). */
export const OFPVID_PRESENT = 0x1000;

/** How a field's value is written in ovs-ofctl's flow syntax. */
export type FieldKind = 'dec' | 'hex' | 'mac' | 'ipv4' | 'ipv6' | 'ct_state';

export interface FieldDef {
  /** OVS's field name (ovs-fields(7)), the same for a field's OXM and NXM forms. */
  name: string;
  /** What ovs-ofctl prints in a match (dl_src for eth_src, nw_src for ipv4_src, ...). */
  matchName: string;
  oxmClass: number;
  field: number;
  /** Value bytes. */
  len: number;
  kind: FieldKind;
  /** The NXM name used in move:...[] (NXM_OF_ETH_SRC), when the field has one in this class. */
  nxmName?: string;
  /**
   * Prerequisite depth: 0 none; 1 needs eth_type; 2 needs ip_proto; 3 needs the ICMPv6 type and code.
   * OVS checks a field's prerequisites against the fields before it (OpenFlow 1.3.5, 7.2.3.6), so a
   * match is encoded in increasing depth.
   */
  depth: number;
}

const B = OFPXMC.OPENFLOW_BASIC;
const X = OFPXMT_OFB;
const def = (
  name: string,
  matchName: string,
  oxmClass: number,
  field: number,
  len: number,
  kind: FieldKind,
  depth: number,
  nxmName?: string,
): FieldDef =>
  nxmName === undefined
    ? { name, matchName, oxmClass, field, len, kind, depth }
    : { name, matchName, oxmClass, field, len, kind, depth, nxmName };

/**
 * The fields known by name. For a field with both an OXM basic and an NXM form, the OXM one comes
 * first: it is what podwire encodes and what OVS returns in OpenFlow 1.3 dumps.
 */
export const FIELDS: readonly FieldDef[] = [
  def('in_port', 'in_port', B, X.IN_PORT, 4, 'dec', 0),
  def('metadata', 'metadata', B, X.METADATA, 8, 'hex', 0),
  def('eth_dst', 'dl_dst', B, X.ETH_DST, 6, 'mac', 0),
  def('eth_src', 'dl_src', B, X.ETH_SRC, 6, 'mac', 0),
  def('eth_type', 'dl_type', B, X.ETH_TYPE, 2, 'hex', 0),
  def('vlan_vid', 'vlan_vid', B, X.VLAN_VID, 2, 'dec', 0),
  def('vlan_pcp', 'vlan_pcp', B, X.VLAN_PCP, 1, 'dec', 0),
  def('ip_proto', 'nw_proto', B, X.IP_PROTO, 1, 'dec', 1),
  def('ipv4_src', 'nw_src', B, X.IPV4_SRC, 4, 'ipv4', 1),
  def('ipv4_dst', 'nw_dst', B, X.IPV4_DST, 4, 'ipv4', 1),
  def('icmpv4_type', 'icmp_type', B, X.ICMPV4_TYPE, 1, 'dec', 2),
  def('icmpv4_code', 'icmp_code', B, X.ICMPV4_CODE, 1, 'dec', 2),
  def('arp_op', 'arp_op', B, X.ARP_OP, 2, 'dec', 1),
  def('arp_spa', 'arp_spa', B, X.ARP_SPA, 4, 'ipv4', 1),
  def('arp_tpa', 'arp_tpa', B, X.ARP_TPA, 4, 'ipv4', 1),
  def('arp_sha', 'arp_sha', B, X.ARP_SHA, 6, 'mac', 1),
  def('arp_tha', 'arp_tha', B, X.ARP_THA, 6, 'mac', 1),
  def('ipv6_src', 'ipv6_src', B, X.IPV6_SRC, 16, 'ipv6', 1),
  def('ipv6_dst', 'ipv6_dst', B, X.IPV6_DST, 16, 'ipv6', 1),
  def('icmpv6_type', 'icmp_type', B, X.ICMPV6_TYPE, 1, 'dec', 2),
  def('icmpv6_code', 'icmp_code', B, X.ICMPV6_CODE, 1, 'dec', 2),
  def('udp_src', 'tp_src', B, X.UDP_SRC, 2, 'dec', 2),
  def('udp_dst', 'tp_dst', B, X.UDP_DST, 2, 'dec', 2),
  def('tcp_src', 'tp_src', B, X.TCP_SRC, 2, 'dec', 2),
  def('tcp_dst', 'tp_dst', B, X.TCP_DST, 2, 'dec', 2),
  def('sctp_src', 'tp_src', B, X.SCTP_SRC, 2, 'dec', 2),
  def('sctp_dst', 'tp_dst', B, X.SCTP_DST, 2, 'dec', 2),
  def('nd_target', 'nd_target', B, X.IPV6_ND_TARGET, 16, 'ipv6', 3),
  def('nd_sll', 'nd_sll', B, X.IPV6_ND_SLL, 6, 'mac', 3),
  def('nd_tll', 'nd_tll', B, X.IPV6_ND_TLL, 6, 'mac', 3),
  // NXM_0: the OpenFlow 1.0 fields, as NXM (move:NXM_OF_ETH_SRC[]->...).
  def('in_port', 'in_port', OFPXMC.NXM_0, 0, 2, 'dec', 0, 'NXM_OF_IN_PORT'),
  def('eth_dst', 'dl_dst', OFPXMC.NXM_0, 1, 6, 'mac', 0, 'NXM_OF_ETH_DST'),
  def('eth_src', 'dl_src', OFPXMC.NXM_0, 2, 6, 'mac', 0, 'NXM_OF_ETH_SRC'),
  def('eth_type', 'dl_type', OFPXMC.NXM_0, 3, 2, 'hex', 0, 'NXM_OF_ETH_TYPE'),
  def('vlan_tci', 'vlan_tci', OFPXMC.NXM_0, 4, 2, 'hex', 0, 'NXM_OF_VLAN_TCI'),
  def('ip_proto', 'nw_proto', OFPXMC.NXM_0, 6, 1, 'dec', 1, 'NXM_OF_IP_PROTO'),
  def('ipv4_src', 'nw_src', OFPXMC.NXM_0, 7, 4, 'ipv4', 1, 'NXM_OF_IP_SRC'),
  def('ipv4_dst', 'nw_dst', OFPXMC.NXM_0, 8, 4, 'ipv4', 1, 'NXM_OF_IP_DST'),
  def('arp_op', 'arp_op', OFPXMC.NXM_0, 15, 2, 'dec', 1, 'NXM_OF_ARP_OP'),
  def('arp_spa', 'arp_spa', OFPXMC.NXM_0, 16, 4, 'ipv4', 1, 'NXM_OF_ARP_SPA'),
  def('arp_tpa', 'arp_tpa', OFPXMC.NXM_0, 17, 4, 'ipv4', 1, 'NXM_OF_ARP_TPA'),
  // NXM_1: registers, conntrack, and the NXM forms of fields OpenFlow 1.2 gave OXM numbers.
  ...[0, 1, 2, 3, 4, 5, 6, 7].map((n) =>
    def(`reg${n}`, `reg${n}`, OFPXMC.NXM_1, n, 4, 'hex', 0, `NXM_NX_REG${n}`),
  ),
  def('arp_sha', 'arp_sha', OFPXMC.NXM_1, 17, 6, 'mac', 1, 'NXM_NX_ARP_SHA'),
  def('arp_tha', 'arp_tha', OFPXMC.NXM_1, 18, 6, 'mac', 1, 'NXM_NX_ARP_THA'),
  def('ipv6_src', 'ipv6_src', OFPXMC.NXM_1, 19, 16, 'ipv6', 1, 'NXM_NX_IPV6_SRC'),
  def('ipv6_dst', 'ipv6_dst', OFPXMC.NXM_1, 20, 16, 'ipv6', 1, 'NXM_NX_IPV6_DST'),
  def('icmpv6_type', 'icmp_type', OFPXMC.NXM_1, 21, 1, 'dec', 2, 'NXM_NX_ICMPV6_TYPE'),
  def('icmpv6_code', 'icmp_code', OFPXMC.NXM_1, 22, 1, 'dec', 2, 'NXM_NX_ICMPV6_CODE'),
  def('nd_target', 'nd_target', OFPXMC.NXM_1, 23, 16, 'ipv6', 3, 'NXM_NX_ND_TARGET'),
  def('nd_sll', 'nd_sll', OFPXMC.NXM_1, 24, 6, 'mac', 3, 'NXM_NX_ND_SLL'),
  def('nd_tll', 'nd_tll', OFPXMC.NXM_1, 25, 6, 'mac', 3, 'NXM_NX_ND_TLL'),
  def('ct_state', 'ct_state', OFPXMC.NXM_1, 105, 4, 'ct_state', 0, 'NXM_NX_CT_STATE'),
  def('ct_zone', 'ct_zone', OFPXMC.NXM_1, 106, 2, 'dec', 0, 'NXM_NX_CT_ZONE'),
  def('ct_mark', 'ct_mark', OFPXMC.NXM_1, 107, 4, 'hex', 0, 'NXM_NX_CT_MARK'),
  // The id of the conjunctive match a packet completed (ovs-fields(7) "Conjunctive Match Fields").
  def('conj_id', 'conj_id', OFPXMC.NXM_1, 37, 4, 'dec', 0, 'NXM_NX_CONJ_ID'),
];

const BY_CLASS_FIELD = new Map(FIELDS.map((f) => [`${f.oxmClass}:${f.field}`, f]));
const BY_NAME = new Map<string, FieldDef>();
for (const f of FIELDS) if (!BY_NAME.has(f.name)) BY_NAME.set(f.name, f);
const BY_NXM_NAME = new Map(FIELDS.filter((f) => f.nxmName).map((f) => [f.nxmName as string, f]));

/** The definition of (class, field), if known. */
export function fieldDef(oxmClass: number, field: number): FieldDef | undefined {
  return BY_CLASS_FIELD.get(`${oxmClass}:${field}`);
}

/** The preferred (OXM basic if any) definition of an OVS field name: `eth_src`, `reg1`, ... */
export function fieldByName(name: string): FieldDef | undefined {
  return BY_NAME.get(name);
}

/** The definition of an NXM name as move:...[] writes it: `NXM_OF_ETH_SRC`, `NXM_NX_REG1`. */
export function fieldByNxmName(name: string): FieldDef | undefined {
  return BY_NXM_NAME.get(name);
}

/** One OXM TLV. */
export interface OxmField {
  oxmClass: number;
  field: number;
  /** Only for OFPXMC_EXPERIMENTER: the experimenter id that follows the header. */
  experimenter?: number;
  value: Buffer;
  /** Present when the TLV has hasmask set. */
  mask?: Buffer;
}

/** An OXM TLV of a known field: value (and mask) from bytes the caller checked. */
export function oxm(def: FieldDef, value: Buffer, mask?: Buffer): OxmField {
  return mask === undefined
    ? { oxmClass: def.oxmClass, field: def.field, value }
    : { oxmClass: def.oxmClass, field: def.field, value, mask };
}

/** The 32-bit header of a TLV: class, field, hasmask, payload length (experimenter id included). */
export function oxmHeader(f: OxmField): number {
  const payload = (f.experimenter === undefined ? 0 : 4) + f.value.length + (f.mask?.length ?? 0);
  if (f.field < 0 || f.field > 0x7f) throw new RangeError(`OXM field ${f.field} is over 7 bits`);
  if (payload > 0xff) throw new RangeError(`OXM payload of ${payload} bytes is over 255`);
  if (f.mask !== undefined && f.mask.length !== f.value.length) {
    throw new RangeError(`OXM mask of ${f.mask.length} bytes for a value of ${f.value.length}`);
  }
  return ((f.oxmClass << 16) | (f.field << 9) | (f.mask === undefined ? 0 : 0x100) | payload) >>> 0;
}

/** One TLV: oxm_header, [experimenter], value, [mask]. Encodes struct ofp_oxm_experimenter_header for class 0xffff. */
export function encodeOxm(f: OxmField): Buffer {
  const header = Buffer.alloc(f.experimenter === undefined ? 4 : 8);
  header.writeUInt32BE(oxmHeader(f), 0);
  if (f.experimenter !== undefined) header.writeUInt32BE(f.experimenter >>> 0, 4);
  return Buffer.concat(f.mask === undefined ? [header, f.value] : [header, f.value, f.mask]);
}

/** Decodes one TLV at the reader's position. */
export function decodeOxm(r: CodecReader): OxmField {
  const header = r.u32('oxm_header');
  const oxmClass = header >>> 16;
  const field = (header >>> 9) & 0x7f;
  const hasMask = (header & 0x100) !== 0;
  let length = header & 0xff;
  let experimenter: number | undefined;
  if (oxmClass === OFPXMC.EXPERIMENTER) {
    if (length < 4) r.fail(`experimenter OXM of length ${length} has no experimenter id`);
    experimenter = r.u32('oxm experimenter');
    length -= 4;
  }
  if (hasMask && length % 2 !== 0) r.fail(`masked OXM ${oxmClass}:${field} has odd length ${length}`);
  const known = fieldDef(oxmClass, field);
  const valueLen = hasMask ? length / 2 : length;
  if (known && valueLen !== known.len) {
    r.fail(`OXM ${known.name} has ${valueLen} value bytes, not ${known.len}`);
  }
  const value = r.bytes(valueLen, 'oxm value');
  const out: OxmField = { oxmClass, field, value };
  if (experimenter !== undefined) out.experimenter = experimenter;
  if (hasMask) out.mask = r.bytes(valueLen, 'oxm mask');
  return out;
}

/** The fields in increasing prerequisite depth (FieldDef.depth), otherwise in the order given. */
export function prerequisiteOrder(fields: readonly OxmField[]): OxmField[] {
  const depth = (f: OxmField) => fieldDef(f.oxmClass, f.field)?.depth ?? 0;
  return fields
    .map((f, i) => ({ f, i }))
    .sort((a, b) => depth(a.f) - depth(b.f) || a.i - b.i)
    .map(({ f }) => f);
}

/** OFPMT_OXM: the only match type of OpenFlow 1.2+. */
export const OFPMT_OXM = 1;

/**
 * struct ofp_match: type OFPMT_OXM, length (header and TLVs, no padding), TLVs, zero padding to 8.
 * Fields are written in prerequisite order (see FieldDef.depth), otherwise as given.
 */
export function encodeMatch(fields: readonly OxmField[]): Buffer {
  const sorted = prerequisiteOrder(fields).map(encodeOxm);
  const length = 4 + sorted.reduce((n, b) => n + b.length, 0);
  const head = Buffer.alloc(4);
  head.writeUInt16BE(OFPMT_OXM, 0);
  head.writeUInt16BE(length, 2);
  return Buffer.concat([head, ...sorted, Buffer.alloc(pad8(length))]);
}

/** Decodes struct ofp_match at the reader's position, padding included. */
export function decodeMatch(r: CodecReader): OxmField[] {
  const type = r.u16('ofp_match.type');
  const length = r.u16('ofp_match.length');
  if (type !== OFPMT_OXM) r.fail(`ofp_match.type ${type} is not OFPMT_OXM (1)`);
  if (length < 4) r.fail(`ofp_match.length ${length} is under 4`);
  const body = r.sub(length - 4, 'ofp_match fields');
  r.skip(pad8(length), 'ofp_match padding');
  const out: OxmField[] = [];
  while (body.remaining > 0) out.push(decodeOxm(body));
  return out;
}

/** The TLV with the mask applied to the value; an all-ones mask dropped. Null: an all-zero mask (matches anything). */
export function normalizeOxm(f: OxmField): OxmField | null {
  if (f.mask === undefined) return f;
  if (f.mask.every((b) => b === 0)) return null;
  if (f.mask.every((b) => b === 0xff)) {
    const out: OxmField = { oxmClass: f.oxmClass, field: f.field, value: f.value };
    if (f.experimenter !== undefined) out.experimenter = f.experimenter;
    return out;
  }
  const value = Buffer.from(f.value.map((b, i) => b & (f.mask?.[i] ?? 0)));
  return { ...f, value };
}
