/**
 * OFPMP_FLOW (OpenFlow 1.3.5, 7.3.5.2 "Individual Flow Statistics"): the request body and the reply
 * entries, both after the multipart header (ofp_multipart_request / _reply: type, flags, pad), which
 * the connection adds and strips. A reply may span several messages (OFPMPF_REPLY_MORE); each
 * message's body is a whole number of ofp_flow_stats.
 */
import { CodecReader, pad8 } from './codec-reader.js';
import type { Flow } from './flow.js';
import { OFPG_ANY, OFPP_ANY, OFPTT_ALL } from './flow-mod.js';
import { decodeInstructions, encodeInstructions } from './instructions.js';
import { decodeMatch, encodeMatch, type OxmField } from './oxm.js';

/** enum ofp_multipart_type: OFPMP_FLOW. */
export const OFPMP_FLOW = 1;

export interface FlowStatsRequest {
  /** One table, or every table (OFPTT_ALL, the default). */
  table?: number;
  cookie?: bigint;
  cookieMask?: bigint;
  match?: OxmField[];
}

/**
 * struct ofp_flow_stats_request: table_id, pad[3], out_port, out_group, pad2[4], cookie, cookie_mask,
 * match. Equivalent to: `ovs-ofctl dump-flows BR [table=T,][cookie=C/M]`.
 */
export function encodeFlowStatsRequest(q: FlowStatsRequest = {}): Buffer {
  const fixed = Buffer.alloc(32);
  fixed.writeUInt8(q.table ?? OFPTT_ALL, 0);
  fixed.writeUInt32BE(OFPP_ANY, 4);
  fixed.writeUInt32BE(OFPG_ANY, 8);
  fixed.writeBigUInt64BE(q.cookie ?? 0n, 16);
  fixed.writeBigUInt64BE(q.cookieMask ?? 0n, 24);
  return Buffer.concat([fixed, encodeMatch(q.match ?? [])]);
}

/** One flow entry of a flow stats reply: the flow, its counters and its age. */
export interface FlowStats extends Flow {
  durationSec: number;
  durationNsec: number;
  idleTimeout: number;
  hardTimeout: number;
  flags: number;
  packetCount: bigint;
  byteCount: bigint;
}

/** struct ofp_flow_stats: length .. byte_count is 48 bytes, then match and instructions. */
const FLOW_STATS_FIXED = 48;

/** Encodes one struct ofp_flow_stats (what a switch sends; for tests and fakes). */
export function encodeFlowStats(s: FlowStats): Buffer {
  const match = encodeMatch(s.match);
  const instructions = encodeInstructions(s.instructions);
  const length = FLOW_STATS_FIXED + match.length + instructions.length;
  const fixed = Buffer.alloc(FLOW_STATS_FIXED);
  fixed.writeUInt16BE(length, 0);
  fixed.writeUInt8(s.table, 2);
  fixed.writeUInt32BE(s.durationSec >>> 0, 4);
  fixed.writeUInt32BE(s.durationNsec >>> 0, 8);
  fixed.writeUInt16BE(s.priority, 12);
  fixed.writeUInt16BE(s.idleTimeout, 14);
  fixed.writeUInt16BE(s.hardTimeout, 16);
  fixed.writeUInt16BE(s.flags, 18);
  fixed.writeBigUInt64BE(s.cookie, 24);
  fixed.writeBigUInt64BE(s.packetCount, 32);
  fixed.writeBigUInt64BE(s.byteCount, 40);
  return Buffer.concat([fixed, match, instructions]);
}

/** Decodes one struct ofp_flow_stats at the reader's position. */
export function decodeFlowStats(r: CodecReader): FlowStats {
  const length = r.u16('ofp_flow_stats.length');
  if (length < FLOW_STATS_FIXED + 8 || pad8(length) !== 0) {
    r.fail(`ofp_flow_stats.length ${length} is under 56 or not a multiple of 8`);
  }
  const e = r.sub(length - 2, 'ofp_flow_stats');
  const table = e.u8('table_id');
  e.skip(1, 'pad');
  const durationSec = e.u32('duration_sec');
  const durationNsec = e.u32('duration_nsec');
  const priority = e.u16('priority');
  const idleTimeout = e.u16('idle_timeout');
  const hardTimeout = e.u16('hard_timeout');
  const flags = e.u16('flags');
  e.skip(4, 'pad2');
  const cookie = e.u64('cookie');
  const packetCount = e.u64('packet_count');
  const byteCount = e.u64('byte_count');
  const match = decodeMatch(e);
  const instructions = decodeInstructions(e);
  return {
    table,
    priority,
    cookie,
    match,
    instructions,
    durationSec,
    durationNsec,
    idleTimeout,
    hardTimeout,
    flags,
    packetCount,
    byteCount,
  };
}

/** Decodes the bodies of a flow stats reply (each after its multipart header) into its entries, in order. */
export function decodeFlowStatsReply(bodies: Uint8Array | readonly Uint8Array[]): FlowStats[] {
  const list = bodies instanceof Uint8Array ? [bodies] : bodies;
  const out: FlowStats[] = [];
  list.forEach((body, i) => {
    const r = new CodecReader(body, `OFPMP_FLOW reply ${i}`);
    while (r.remaining > 0) out.push(decodeFlowStats(r));
  });
  return out;
}
