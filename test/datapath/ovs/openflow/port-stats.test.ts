/**
 * OFPMP_PORT_STATS's codec (port-stats.ts): round trips (fast-check) across several reply bodies,
 * the request body, and truncated replies. The real switch's answer is in real-switch.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DecodeError } from '../../../../src/base/errors.js';
import { OFPP_ANY } from '../../../../src/datapath/ovs/openflow/flow-mod.js';
import {
  decodePortStatsReply,
  encodePortStats,
  encodePortStatsRequest,
  OFP13_PORT_STATS_LEN,
  type PortStats,
} from '../../../../src/datapath/ovs/openflow/port-stats.js';

const u64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
const u32 = fc.integer({ min: 0, max: 2 ** 32 - 1 });

const anyPortStats: fc.Arbitrary<PortStats> = fc
  .record({
    portNo: u32,
    rxPackets: u64,
    txPackets: u64,
    rxBytes: u64,
    txBytes: u64,
    rxDropped: u64,
    txDropped: u64,
    rxErrors: u64,
    txErrors: u64,
    rxFrameErr: u64,
    rxOverErr: u64,
    rxCrcErr: u64,
    collisions: u64,
    durationSec: u32,
    durationNsec: u32,
  })
  .map((r) => ({ ...r })); // a plain object, as decoding makes (fc.record's have no prototype)

test('port stats entries decode to what was encoded, across several reply bodies', () => {
  fc.assert(
    fc.property(fc.array(fc.array(anyPortStats, { maxLength: 3 }), { maxLength: 3 }), (bodies) => {
      const encoded = bodies.map((list) => Buffer.concat(list.map(encodePortStats)));
      for (const body of encoded) assert.equal(body.length % OFP13_PORT_STATS_LEN, 0);
      assert.deepEqual(decodePortStatsReply(encoded), bodies.flat());
    }),
    { numRuns: 200 },
  );
});

test('the counters sit where struct ofp_port_stats has them', () => {
  const s: PortStats = {
    portNo: 7,
    rxPackets: 1n,
    txPackets: 2n,
    rxBytes: 3n,
    txBytes: 4n,
    rxDropped: 5n,
    txDropped: 6n,
    rxErrors: 7n,
    txErrors: 8n,
    rxFrameErr: 9n,
    rxOverErr: 10n,
    rxCrcErr: 11n,
    collisions: 12n,
    durationSec: 13,
    durationNsec: 14,
  };
  const b = encodePortStats(s);
  assert.equal(b.readUInt32BE(0), 7);
  assert.equal(b.readUInt32BE(4), 0, 'pad');
  for (let i = 0; i < 12; i++) assert.equal(b.readBigUInt64BE(8 + 8 * i), BigInt(i + 1));
  assert.equal(b.readUInt32BE(104), 13);
  assert.equal(b.readUInt32BE(108), 14);
});

test('the request asks for every port (OFPP_ANY) unless given one', () => {
  assert.deepEqual([...encodePortStatsRequest()], [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
  assert.equal(encodePortStatsRequest().readUInt32BE(0), OFPP_ANY);
  assert.deepEqual([...encodePortStatsRequest(3)], [0, 0, 0, 3, 0, 0, 0, 0]);
});

test('a body that is not a whole number of entries is a DecodeError', () => {
  fc.assert(
    fc.property(fc.array(anyPortStats, { minLength: 1, maxLength: 3 }), fc.nat(), (list, cut) => {
      const body = Buffer.concat(list.map(encodePortStats));
      const n = 1 + (cut % (body.length - 1));
      if (n % OFP13_PORT_STATS_LEN === 0) return; // a shorter, valid reply
      assert.throws(() => decodePortStatsReply(body.subarray(0, n)), DecodeError);
    }),
    { numRuns: 200 },
  );
});
