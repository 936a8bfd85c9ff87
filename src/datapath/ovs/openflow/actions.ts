/**
 * Actions (OpenFlow 1.3.5, 7.2.5 "Action Structures") and the two Nicira vendor actions the pipeline
 * uses (OVS's include/openvswitch/nicira-ext.h and lib/ofp-actions.c): NXAST_REG_MOVE, NXAST_CT and
 * NXAST_CONJUNCTION (NetworkPolicy's conjunctive matches).
 * Every action is a TLV: type, length (a multiple of 8, header included), body.
 */
import { CodecReader, pad8 } from './codec-reader.js';
import { decodeOxm, encodeOxm, type OxmField } from './oxm.js';

/** enum ofp_action_type (the ones podwire uses). */
export const OFPAT = {
  OUTPUT: 0,
  PUSH_VLAN: 17,
  POP_VLAN: 18,
  SET_FIELD: 25,
  EXPERIMENTER: 0xffff,
} as const;

/** enum ofp_port_no: the reserved ports. */
export const OFPP = {
  MAX: 0xffffff00,
  IN_PORT: 0xfffffff8,
  TABLE: 0xfffffff9,
  NORMAL: 0xfffffffa,
  FLOOD: 0xfffffffb,
  ALL: 0xfffffffc,
  CONTROLLER: 0xfffffffd,
  LOCAL: 0xfffffffe,
  ANY: 0xffffffff,
} as const;

/** Nicira's experimenter id (NX_VENDOR_ID). */
export const NX_VENDOR_ID = 0x00002320;

/** enum nx_action_subtype (the ones podwire uses). */
export const NXAST = {
  REG_MOVE: 6,
  CONJUNCTION: 34,
  CT: 35,
} as const;

/** struct nx_action_conntrack.flags. */
export const NX_CT_F = {
  COMMIT: 1 << 0,
  FORCE: 1 << 1,
} as const;

/** nx_action_conntrack.recirc_table when ct() does not recirculate. */
export const NX_CT_RECIRC_NONE = 0xff;

export type OfpAction =
  /** ofp_action_output: `output:PORT`, `IN_PORT`, `FLOOD`. max_len matters only for CONTROLLER. */
  | { type: 'output'; port: number; maxLen: number }
  /** ofp_action_set_field: `set_field:VALUE->FIELD`. */
  | { type: 'set_field'; field: OxmField }
  /** ofp_action_push: `push_vlan:ETHERTYPE`. */
  | { type: 'push_vlan'; ethertype: number }
  /** ofp_action_generic: `pop_vlan`. */
  | { type: 'pop_vlan' }
  /**
   * nx_action_reg_move: `move:SRC[srcOfs..srcOfs+nBits-1]->DST[dstOfs..]`; src and dst are NXM/OXM
   * headers (class, field, hasmask 0, length).
   */
  | { type: 'reg_move'; nBits: number; srcOfs: number; dstOfs: number; src: number; dst: number }
  /**
   * nx_action_conntrack: `ct(commit,zone=N,table=N,exec(...))`. zoneSrc 0: `zone` is the zone itself;
   * otherwise a field header and `zone` its ofs_nbits.
   */
  | {
      type: 'ct';
      flags: number;
      zoneSrc: number;
      zone: number;
      recircTable: number;
      alg: number;
      actions: OfpAction[];
    }
  /**
   * nx_action_conjunction: `conjunction(ID,K/N)`: this flow is clause K of N of conjunctive match ID.
   * `clause` is K as written (1-based); the wire carries K-1.
   */
  | { type: 'conjunction'; id: number; clause: number; nClauses: number }
  /** Any other action, kept as its type and body bytes (after type and length). */
  | { type: 'raw'; actionType: number; body: Buffer };

function tlv(type: number, body: Buffer): Buffer {
  const length = 4 + body.length;
  const out = Buffer.alloc(length + pad8(length));
  out.writeUInt16BE(type, 0);
  out.writeUInt16BE(out.length, 2);
  body.copy(out, 4);
  return out;
}

function nxHead(subtype: number, rest: Buffer): Buffer {
  const head = Buffer.alloc(6);
  head.writeUInt32BE(NX_VENDOR_ID, 0);
  head.writeUInt16BE(subtype, 4);
  return tlv(OFPAT.EXPERIMENTER, Buffer.concat([head, rest]));
}

/** One action in its wire form, padded to 8. */
export function encodeAction(a: OfpAction): Buffer {
  switch (a.type) {
    case 'output': {
      // struct ofp_action_output: port, max_len, pad[6].
      const b = Buffer.alloc(12);
      b.writeUInt32BE(a.port >>> 0, 0);
      b.writeUInt16BE(a.maxLen, 4);
      return tlv(OFPAT.OUTPUT, b);
    }
    case 'set_field':
      // struct ofp_action_set_field: one OXM TLV, then zero padding to 8.
      return tlv(OFPAT.SET_FIELD, encodeOxm(a.field));
    case 'push_vlan': {
      // struct ofp_action_push: ethertype, pad[2].
      const b = Buffer.alloc(4);
      b.writeUInt16BE(a.ethertype, 0);
      return tlv(OFPAT.PUSH_VLAN, b);
    }
    case 'pop_vlan':
      return tlv(OFPAT.POP_VLAN, Buffer.alloc(4));
    case 'reg_move': {
      // struct nx_action_reg_move: n_bits, src_ofs, dst_ofs, src, dst (24 bytes in all).
      const b = Buffer.alloc(14);
      b.writeUInt16BE(a.nBits, 0);
      b.writeUInt16BE(a.srcOfs, 2);
      b.writeUInt16BE(a.dstOfs, 4);
      b.writeUInt32BE(a.src >>> 0, 6);
      b.writeUInt32BE(a.dst >>> 0, 10);
      return nxHead(NXAST.REG_MOVE, b);
    }
    case 'ct': {
      // struct nx_action_conntrack: flags, zone_src, zone (imm or ofs_nbits), recirc_table, pad[3],
      // alg (24 bytes), then the nested actions (each a multiple of 8, so the whole is too).
      const b = Buffer.alloc(14);
      b.writeUInt16BE(a.flags, 0);
      b.writeUInt32BE(a.zoneSrc >>> 0, 2);
      b.writeUInt16BE(a.zone, 6);
      b.writeUInt8(a.recircTable, 8);
      b.writeUInt16BE(a.alg, 12);
      return nxHead(NXAST.CT, Buffer.concat([b, encodeActions(a.actions)]));
    }
    case 'conjunction': {
      // struct nx_action_conjunction: clause (0-based), n_clauses, id (16 bytes in all).
      const b = Buffer.alloc(6);
      b.writeUInt8(a.clause - 1, 0);
      b.writeUInt8(a.nClauses, 1);
      b.writeUInt32BE(a.id >>> 0, 2);
      return nxHead(NXAST.CONJUNCTION, b);
    }
    case 'raw':
      return tlv(a.actionType, a.body);
  }
}

/** A list of actions, as an apply-actions instruction or ct's exec() carries them. */
export function encodeActions(actions: readonly OfpAction[]): Buffer {
  return Buffer.concat(actions.map(encodeAction));
}

/** Decodes one action at the reader's position. */
export function decodeAction(r: CodecReader): OfpAction {
  const type = r.u16('action type');
  const len = r.u16('action length');
  if (len < 8 || len % 8 !== 0) r.fail(`action type ${type} has length ${len}, not a multiple of 8 from 8`);
  const b = r.sub(len - 4, `action type ${type}`);
  switch (type) {
    case OFPAT.OUTPUT: {
      if (len !== 16) b.fail(`OFPAT_OUTPUT has length ${len}, not 16`);
      const port = b.u32('port');
      const maxLen = b.u16('max_len');
      return { type: 'output', port, maxLen };
    }
    case OFPAT.SET_FIELD: {
      const field = decodeOxm(b);
      if (b.buf.subarray(b.at, b.end).some((x) => x !== 0)) b.fail('OFPAT_SET_FIELD padding is not zero');
      return { type: 'set_field', field };
    }
    case OFPAT.PUSH_VLAN:
      if (len !== 8) b.fail(`OFPAT_PUSH_VLAN has length ${len}, not 8`);
      return { type: 'push_vlan', ethertype: b.u16('ethertype') };
    case OFPAT.POP_VLAN:
      if (len !== 8) b.fail(`OFPAT_POP_VLAN has length ${len}, not 8`);
      return { type: 'pop_vlan' };
    case OFPAT.EXPERIMENTER:
      return decodeExperimenter(b, len);
    default:
      return { type: 'raw', actionType: type, body: b.bytes(b.remaining, 'body') };
  }
}

function decodeExperimenter(b: CodecReader, len: number): OfpAction {
  const start = b.at;
  const vendor = b.u32('experimenter');
  const subtype = vendor === NX_VENDOR_ID && b.remaining >= 2 ? b.u16('subtype') : -1;
  if (subtype === NXAST.REG_MOVE) {
    if (len !== 24) b.fail(`NXAST_REG_MOVE has length ${len}, not 24`);
    const nBits = b.u16('n_bits');
    const srcOfs = b.u16('src_ofs');
    const dstOfs = b.u16('dst_ofs');
    const src = b.u32('src');
    const dst = b.u32('dst');
    return { type: 'reg_move', nBits, srcOfs, dstOfs, src, dst };
  }
  if (subtype === NXAST.CONJUNCTION) {
    if (len !== 16) b.fail(`NXAST_CONJUNCTION has length ${len}, not 16`);
    const clause = b.u8('clause') + 1;
    const nClauses = b.u8('n_clauses');
    const id = b.u32('id');
    return { type: 'conjunction', id, clause, nClauses };
  }
  if (subtype === NXAST.CT) {
    const flags = b.u16('flags');
    const zoneSrc = b.u32('zone_src');
    const zone = b.u16('zone');
    const recircTable = b.u8('recirc_table');
    b.skip(3, 'pad');
    const alg = b.u16('alg');
    const actions = decodeActions(b.sub(b.remaining, 'NXAST_CT actions'));
    return { type: 'ct', flags, zoneSrc, zone, recircTable, alg, actions };
  }
  b.at = start;
  return { type: 'raw', actionType: OFPAT.EXPERIMENTER, body: b.bytes(b.remaining, 'body') };
}

/** Decodes actions until the reader's end. */
export function decodeActions(r: CodecReader): OfpAction[] {
  const out: OfpAction[] = [];
  while (r.remaining > 0) out.push(decodeAction(r));
  return out;
}

/** Decodes a whole buffer of actions. */
export function decodeActionBytes(buf: Uint8Array): OfpAction[] {
  return decodeActions(new CodecReader(buf, 'actions'));
}

/** The header of an NXM/OXM field as NXAST_REG_MOVE carries it (class, field, no mask, length). */
export function nxmHeader(oxmClass: number, field: number, len: number): number {
  return ((oxmClass << 16) | (field << 9) | len) >>> 0;
}
