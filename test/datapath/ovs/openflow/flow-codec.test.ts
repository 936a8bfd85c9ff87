/**
 * FLOW_MOD and flow stats: round trips (fast-check), what ovs-ofctl prints of our DELETE, DELETE_STRICT
 * and flow stats requests, and truncated or corrupted replies.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { must } from '../../../../bed/exec.js';
import { ovsAvailable } from '../../../../bed/ovs.js';
import { DecodeError } from '../../../../src/base/errors.js';
import {
  decodeFlowMod,
  encodeFlowMod,
  flowDeleteByCookie,
  flowDeleteStrict,
} from '../../../../src/datapath/ovs/openflow/flow-mod.js';
import { parseFlowText } from '../../../../src/datapath/ovs/openflow/flow-parse.js';
import {
  decodeFlowStatsReply,
  encodeFlowStats,
  encodeFlowStatsRequest,
  type FlowStats,
  OFPMP_FLOW,
} from '../../../../src/datapath/ovs/openflow/flow-stats.js';
import { encodeMessage, OFP13_VERSION, OFPT13 } from '../../../../src/datapath/ovs/openflow/header.js';
import { prerequisiteOrder } from '../../../../src/datapath/ovs/openflow/oxm.js';
import { anyFlowMod, anyFlowStats } from './flow-arbitraries.js';

const inOrder = <T extends { match: Parameters<typeof prerequisiteOrder>[0] }>(x: T): T => ({
  ...x,
  match: prerequisiteOrder(x.match),
});

test('a FLOW_MOD body decodes to what was encoded (match in prerequisite order)', () => {
  fc.assert(
    fc.property(anyFlowMod, (m) => {
      assert.deepEqual(decodeFlowMod(encodeFlowMod(m)), inOrder(m));
    }),
    { numRuns: 300 },
  );
});

test('flow stats entries decode to what was encoded, across several reply bodies', () => {
  fc.assert(
    fc.property(fc.array(fc.array(anyFlowStats, { maxLength: 3 }), { maxLength: 3 }), (bodies) => {
      const encoded = bodies.map((list) => Buffer.concat(list.map(encodeFlowStats)));
      assert.deepEqual(decodeFlowStatsReply(encoded), bodies.flat().map(inOrder));
    }),
    { numRuns: 200 },
  );
});

test('a truncated flow stats body is a DecodeError; corrupted bytes decode or are a DecodeError', () => {
  fc.assert(
    fc.property(fc.array(anyFlowStats, { minLength: 1, maxLength: 3 }), fc.nat(), (list, cut) => {
      const body = Buffer.concat(list.map(encodeFlowStats));
      const n = 1 + (cut % (body.length - 1));
      // A cut on an entry boundary is a shorter, valid reply; anywhere else must be seen.
      let at = 0;
      const boundaries = new Set(list.map((s) => (at += encodeFlowStats(s).length)));
      if (boundaries.has(n)) return;
      assert.throws(() => decodeFlowStatsReply(body.subarray(0, n)), DecodeError);
    }),
    { numRuns: 300 },
  );
  fc.assert(
    fc.property(
      fc.array(anyFlowStats, { minLength: 1, maxLength: 2 }),
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
      (list, edits) => {
        const body = Buffer.concat(list.map(encodeFlowStats));
        for (const [at, b] of edits) body[at % body.length] = b;
        try {
          decodeFlowStatsReply(body);
        } catch (e) {
          if (!(e instanceof DecodeError)) throw e;
        }
      },
    ),
    { numRuns: 500 },
  );
  fc.assert(
    fc.property(anyFlowMod, fc.nat(), (m, cut) => {
      const body = encodeFlowMod(m);
      try {
        decodeFlowMod(body.subarray(0, cut % body.length));
      } catch (e) {
        if (!(e instanceof DecodeError)) throw e;
      }
    }),
    { numRuns: 300 },
  );
  assert.throws(() => decodeFlowStatsReply(Buffer.from('0010', 'hex')), /ofp_flow_stats.length 16/);
});

test('a flow stats entry carries its counters', () => {
  const flow = parseFlowText(
    'table=50,priority=200,cookie=0x5,reg1=0,dl_dst=0a:58:0a:f4:01:02 actions=output:7',
  );
  const s: FlowStats = {
    ...flow,
    durationSec: 3,
    durationNsec: 5,
    idleTimeout: 0,
    hardTimeout: 0,
    flags: 0,
    packetCount: 12n,
    byteCount: 1500n,
  };
  const [back] = decodeFlowStatsReply([encodeFlowStats(s)]);
  assert.equal(back?.packetCount, 12n);
  assert.equal(back?.byteCount, 1500n);
  assert.equal(back?.durationSec, 3);
});

describe('what ovs-ofctl prints of our other messages', {
  skip: !ovsAvailable() && 'Open vSwitch is not installed',
}, () => {
  const print = async (type: number, body: Buffer) =>
    (
      await must('ovs-ofctl', ['ofp-print', encodeMessage(OFP13_VERSION, type, 1, body).toString('hex')])
    ).trim();
  const mp = (body: Buffer) => {
    const head = Buffer.alloc(8);
    head.writeUInt16BE(OFPMP_FLOW, 0);
    return Buffer.concat([head, body]);
  };

  test('DELETE by cookie over every table: del-flows cookie=C/-1', async () => {
    assert.equal(
      await print(OFPT13.FLOW_MOD, encodeFlowMod(flowDeleteByCookie(0x2711642b726b044n))),
      'OFPT_FLOW_MOD (OF1.3) (xid=0x1): DEL table:255 priority=0 cookie:0x2711642b726b044/0xffffffffffffffff actions=drop',
    );
  });

  test('DELETE_STRICT of one flow: table, priority and match, any cookie', async () => {
    const f = parseFlowText(
      'table=30,priority=200,cookie=0x7,icmp6,in_port=7,dl_src=0a:58:0a:f4:01:02,icmp_type=136,icmp_code=0,nd_target=fd00::2,nd_tll=0a:58:0a:f4:01:02 actions=goto_table:40',
    );
    assert.equal(
      await print(OFPT13.FLOW_MOD, encodeFlowMod(flowDeleteStrict(f))),
      'OFPT_FLOW_MOD (OF1.3) (xid=0x1): DEL_STRICT table:30 priority=200,icmp6,in_port=7,dl_src=0a:58:0a:f4:01:02,icmp_type=136,icmp_code=0,nd_target=fd00::2,nd_tll=0a:58:0a:f4:01:02 actions=drop',
    );
  });

  test('flow stats requests: every table, and one table', async () => {
    assert.equal(
      await print(OFPT13.MULTIPART_REQUEST, mp(encodeFlowStatsRequest())),
      'OFPST_FLOW request (OF1.3) (xid=0x1):',
    );
    assert.equal(
      await print(
        OFPT13.MULTIPART_REQUEST,
        mp(encodeFlowStatsRequest({ table: 10, cookie: 5n, cookieMask: 0xffffffffffffffffn })),
      ),
      'OFPST_FLOW request (OF1.3) (xid=0x1): table=10',
    );
  });

  test('a flow stats reply we encode is the reply ovs-ofctl prints', async () => {
    const flow = parseFlowText(
      'table=46,priority=220,cookie=0x100000000000000,ct_state=+new+trk,ip,in_port=1 actions=ct(commit,zone=65520,exec(set_field:0x1->ct_mark)),goto_table:50',
    );
    const s: FlowStats = {
      ...flow,
      durationSec: 3,
      durationNsec: 500000000,
      idleTimeout: 0,
      hardTimeout: 0,
      flags: 0,
      packetCount: 12n,
      byteCount: 1500n,
    };
    const text = await print(OFPT13.MULTIPART_REPLY, mp(encodeFlowStats(s)));
    assert.match(
      text,
      /cookie=0x100000000000000, duration=3\.500s, table=46, n_packets=12, n_bytes=1500, priority=220,ct_state=\+new\+trk,ip,in_port=1 actions=ct\(commit,zone=65520,exec\(set_field:0x1->ct_mark\)\),goto_table:50/,
    );
  });
});
