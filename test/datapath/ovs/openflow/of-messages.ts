/**
 * OpenFlow 1.3 messages built by hand for the connection tests (the flow codec proper lives in
 * src/datapath/ovs/openflow/flow*.ts): a FLOW_MOD with an empty match and no instructions ("drop"),
 * and the minimal flow stats request.
 */
import { OFPT13 } from '../../../../src/datapath/ovs/openflow/header.js';

export const OFPFC_ADD = 0;
export const OFPFC_DELETE = 3;
export const OFPFF_CHECK_OVERLAP = 1 << 1;
const OFP_NO_BUFFER = 0xffffffff;
const OFPP_ANY = 0xffffffff;
const OFPG_ANY = 0xffffffff;
export const OFPTT_ALL = 0xff;

/** An ofp_match of type OFPMT_OXM: empty (length 4, padded to 8), or OXM_OF_IN_PORT (length 12, padded to 16). */
function match(inPort?: number): Buffer {
  if (inPort === undefined) {
    const m = Buffer.alloc(8);
    m.writeUInt16BE(1, 0);
    m.writeUInt16BE(4, 2);
    return m;
  }
  const m = Buffer.alloc(16);
  m.writeUInt16BE(1, 0);
  m.writeUInt16BE(12, 2);
  m.writeUInt32BE(0x80000004, 4); // OFPXMC_OPENFLOW_BASIC, OFPXMT_OFB_IN_PORT, no mask, 4 bytes
  m.writeUInt32BE(inPort, 8);
  return m;
}

/** ofp_flow_mod (after the header) matching everything (or one in_port), with no instructions: `actions=drop`. */
export function flowModBody(f: {
  tableId?: number;
  priority?: number;
  cookie?: bigint;
  command?: number;
  flags?: number;
  inPort?: number;
}): Buffer {
  const b = Buffer.alloc(40);
  b.writeBigUInt64BE(f.cookie ?? 0n, 0);
  b.writeBigUInt64BE(0n, 8); // cookie_mask
  b.writeUInt8(f.tableId ?? 0, 16);
  b.writeUInt8(f.command ?? OFPFC_ADD, 17);
  b.writeUInt16BE(f.priority ?? 0, 22);
  b.writeUInt32BE(OFP_NO_BUFFER, 24);
  b.writeUInt32BE(OFPP_ANY, 28);
  b.writeUInt32BE(OFPG_ANY, 32);
  b.writeUInt16BE(f.flags ?? 0, 36);
  return Buffer.concat([b, match(f.inPort)]);
}

export function flowMod(f: Parameters<typeof flowModBody>[0]): { type: number; body: Buffer } {
  return { type: OFPT13.FLOW_MOD, body: flowModBody(f) };
}

/** ofp_flow_stats_request for every flow of every table. */
export function flowStatsRequestBody(): Buffer {
  const b = Buffer.alloc(32);
  b.writeUInt8(OFPTT_ALL, 0);
  b.writeUInt32BE(OFPP_ANY, 4);
  b.writeUInt32BE(OFPG_ANY, 8);
  return Buffer.concat([b, match()]);
}
