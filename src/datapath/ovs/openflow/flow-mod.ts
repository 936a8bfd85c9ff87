/**
 * OFPT_FLOW_MOD (OpenFlow 1.3.5, 7.3.4.1 "Modify Flow Entry Message"): the body after the 8-byte
 * header (header.ts's encodeMessage adds it, type OFPT13.FLOW_MOD). OpenFlow 1.4 has the same
 * layout (its `importance` is our zero pad), so a body also serves in a 1.4 bundle.
 */
import { CodecReader } from './codec-reader.js';
import type { Flow } from './flow.js';
import { decodeInstructions, encodeInstructions, type OfpInstruction } from './instructions.js';
import { decodeMatch, encodeMatch, type OxmField } from './oxm.js';

/** enum ofp_flow_mod_command. */
export const OFPFC = {
  ADD: 0,
  MODIFY: 1,
  MODIFY_STRICT: 2,
  DELETE: 3,
  DELETE_STRICT: 4,
} as const;

/** enum ofp_flow_mod_flags. */
export const OFPFF = {
  SEND_FLOW_REM: 1 << 0,
  CHECK_OVERLAP: 1 << 1,
  RESET_COUNTS: 1 << 2,
  NO_PKT_COUNTS: 1 << 3,
  NO_BYT_COUNTS: 1 << 4,
} as const;

/** ofp_table: every table, for DELETE and flow stats requests. */
export const OFPTT_ALL = 0xff;
/** Not a buffered packet. */
export const OFP_NO_BUFFER = 0xffffffff;
/** ofp_port OFPP_ANY / ofp_group OFPG_ANY: no out_port / out_group restriction. */
export const OFPP_ANY = 0xffffffff;
export const OFPG_ANY = 0xffffffff;
/** A cookie mask that compares every bit (`cookie=C/-1`). */
export const COOKIE_MASK_ALL = 0xffff_ffff_ffff_ffffn;

/** struct ofp_flow_mod, less the header. */
export interface FlowMod {
  cookie: bigint;
  cookieMask: bigint;
  table: number;
  command: number;
  idleTimeout: number;
  hardTimeout: number;
  priority: number;
  bufferId: number;
  outPort: number;
  outGroup: number;
  flags: number;
  match: OxmField[];
  instructions: OfpInstruction[];
}

/** ofp_flow_mod's fixed part after the header: cookie .. pad[2]. */
const FLOW_MOD_FIXED = 40;

/** Encodes struct ofp_flow_mod (without ofp_header). */
export function encodeFlowMod(m: FlowMod): Buffer {
  const fixed = Buffer.alloc(FLOW_MOD_FIXED);
  fixed.writeBigUInt64BE(m.cookie, 0);
  fixed.writeBigUInt64BE(m.cookieMask, 8);
  fixed.writeUInt8(m.table, 16);
  fixed.writeUInt8(m.command, 17);
  fixed.writeUInt16BE(m.idleTimeout, 18);
  fixed.writeUInt16BE(m.hardTimeout, 20);
  fixed.writeUInt16BE(m.priority, 22);
  fixed.writeUInt32BE(m.bufferId >>> 0, 24);
  fixed.writeUInt32BE(m.outPort >>> 0, 28);
  fixed.writeUInt32BE(m.outGroup >>> 0, 32);
  fixed.writeUInt16BE(m.flags, 36);
  return Buffer.concat([fixed, encodeMatch(m.match), encodeInstructions(m.instructions)]);
}

/** Decodes struct ofp_flow_mod from the body after the header. */
export function decodeFlowMod(body: Uint8Array): FlowMod {
  const r = new CodecReader(body, 'OFPT_FLOW_MOD');
  const cookie = r.u64('cookie');
  const cookieMask = r.u64('cookie_mask');
  const table = r.u8('table_id');
  const command = r.u8('command');
  const idleTimeout = r.u16('idle_timeout');
  const hardTimeout = r.u16('hard_timeout');
  const priority = r.u16('priority');
  const bufferId = r.u32('buffer_id');
  const outPort = r.u32('out_port');
  const outGroup = r.u32('out_group');
  const flags = r.u16('flags');
  r.skip(2, 'pad');
  const match = decodeMatch(r);
  const instructions = decodeInstructions(r);
  return {
    cookie,
    cookieMask,
    table,
    command,
    idleTimeout,
    hardTimeout,
    priority,
    bufferId,
    outPort,
    outGroup,
    flags,
    match,
    instructions,
  };
}

function base(command: number, table: number): FlowMod {
  return {
    cookie: 0n,
    cookieMask: 0n,
    table,
    command,
    idleTimeout: 0,
    hardTimeout: 0,
    priority: 0,
    bufferId: OFP_NO_BUFFER,
    outPort: OFPP_ANY,
    outGroup: OFPG_ANY,
    flags: 0,
    match: [],
    instructions: [],
  };
}

/** Equivalent to: `ovs-ofctl add-flow BR FLOW` (no timeouts, no flow-removed message). */
export function flowAdd(flow: Flow): FlowMod {
  return {
    ...base(OFPFC.ADD, flow.table),
    cookie: flow.cookie,
    priority: flow.priority,
    match: flow.match,
    instructions: flow.instructions,
  };
}

/** Equivalent to: `ovs-ofctl del-flows BR cookie=C/-1` (every table). */
export function flowDeleteByCookie(cookie: bigint): FlowMod {
  return { ...base(OFPFC.DELETE, OFPTT_ALL), cookie, cookieMask: COOKIE_MASK_ALL };
}

/** Equivalent to: `ovs-ofctl del-flows --strict BR table=T,priority=P,MATCH` (any cookie). */
export function flowDeleteStrict(flow: Pick<Flow, 'table' | 'priority' | 'match'>): FlowMod {
  return { ...base(OFPFC.DELETE_STRICT, flow.table), priority: flow.priority, match: flow.match };
}

/** The body of OFPT_FLOW_MOD ADD for `flow`: encodeFlowMod(flowAdd(flow)). */
export function flowAddBody(flow: Flow): Buffer {
  return encodeFlowMod(flowAdd(flow));
}
