/**
 * OFPMP_PORT_STATS (OpenFlow 1.3.5, 7.3.5.6 "Port Statistics"): the request body (one port, or
 * OFPP_ANY for all) and the reply entries, after the multipart header the connection adds and
 * strips. Each entry is a fixed 112 bytes; a reply may span several messages.
 */
import { CodecReader } from './codec-reader.js';
import { OFPP_ANY } from './flow-mod.js';

/** enum ofp_multipart_type: OFPMP_PORT_STATS. */
export const OFPMP_PORT_STATS = 4;

/** struct ofp_port_stats: port_no, pad[4], twelve u64 counters, duration_sec, duration_nsec. */
export const OFP13_PORT_STATS_LEN = 112;

/** One port's counters. A counter the switch does not keep is all ones (2^64 - 1), as it sent it. */
export interface PortStats {
  portNo: number;
  rxPackets: bigint;
  txPackets: bigint;
  rxBytes: bigint;
  txBytes: bigint;
  rxDropped: bigint;
  txDropped: bigint;
  rxErrors: bigint;
  txErrors: bigint;
  rxFrameErr: bigint;
  rxOverErr: bigint;
  rxCrcErr: bigint;
  collisions: bigint;
  durationSec: number;
  durationNsec: number;
}

/** The twelve u64 counters, in the order of struct ofp_port_stats. */
const COUNTERS = [
  'rxPackets',
  'txPackets',
  'rxBytes',
  'txBytes',
  'rxDropped',
  'txDropped',
  'rxErrors',
  'txErrors',
  'rxFrameErr',
  'rxOverErr',
  'rxCrcErr',
  'collisions',
] as const;

/**
 * struct ofp_port_stats_request: port_no, pad[4]. Equivalent to: `ovs-ofctl -O OpenFlow13
 * dump-ports BRIDGE [PORT]`.
 */
export function encodePortStatsRequest(portNo: number = OFPP_ANY): Buffer {
  const out = Buffer.alloc(8);
  out.writeUInt32BE(portNo >>> 0, 0);
  return out;
}

/** Encodes one struct ofp_port_stats (what a switch sends; for tests and fakes). */
export function encodePortStats(s: PortStats): Buffer {
  const out = Buffer.alloc(OFP13_PORT_STATS_LEN);
  out.writeUInt32BE(s.portNo >>> 0, 0);
  for (const [i, name] of COUNTERS.entries()) out.writeBigUInt64BE(s[name], 8 + 8 * i);
  out.writeUInt32BE(s.durationSec >>> 0, 104);
  out.writeUInt32BE(s.durationNsec >>> 0, 108);
  return out;
}

/** Decodes the bodies of a port stats reply (each after its multipart header) into its entries, in order. */
export function decodePortStatsReply(bodies: Uint8Array | readonly Uint8Array[]): PortStats[] {
  const list = bodies instanceof Uint8Array ? [bodies] : bodies;
  const out: PortStats[] = [];
  list.forEach((body, i) => {
    const r = new CodecReader(body, `OFPMP_PORT_STATS reply ${i}`);
    if (r.remaining % OFP13_PORT_STATS_LEN !== 0) {
      r.fail(`${r.remaining} bytes is not a whole number of ${OFP13_PORT_STATS_LEN}-byte entries`);
    }
    while (r.remaining > 0) {
      const portNo = r.u32('port_no');
      r.skip(4, 'pad');
      const counters = {} as Record<(typeof COUNTERS)[number], bigint>;
      for (const name of COUNTERS) counters[name] = r.u64(name);
      out.push({
        portNo,
        ...counters,
        durationSec: r.u32('duration_sec'),
        durationNsec: r.u32('duration_nsec'),
      });
    }
  });
  return out;
}
