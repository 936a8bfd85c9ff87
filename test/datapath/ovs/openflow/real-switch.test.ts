/**
 * The native OpenFlow client against a real switch (a private ovs-vswitchd, userspace bridge):
 * every message type podwire's connection layer uses is answered, and the switch's ERRORs come back
 * with the request that caused them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { OpenflowSwitch, ovsAvailable } from '../../../../bed/openflow-switch.js';
import { NotAvailableError } from '../../../../src/base/errors.js';
import { OpenflowConnection, OpenflowError } from '../../../../src/datapath/ovs/openflow/connection.js';
import { OFPET13 } from '../../../../src/datapath/ovs/openflow/error-msg.js';
import { datapathIdText } from '../../../../src/datapath/ovs/openflow/features.js';
import { OFP10_VERSION, OFPT13 } from '../../../../src/datapath/ovs/openflow/header.js';
import { decodeDesc, decodePortDesc, OFPMP } from '../../../../src/datapath/ovs/openflow/multipart.js';
import { noFlood, ports10, setNoFlood } from '../../../../src/datapath/ovs/openflow/port-mod-of10.js';
import {
  decodePortStatsReply,
  encodePortStatsRequest,
  OFPMP_PORT_STATS,
} from '../../../../src/datapath/ovs/openflow/port-stats.js';
import {
  flowMod,
  flowStatsRequestBody,
  OFPFC_DELETE,
  OFPFF_CHECK_OVERLAP,
  OFPTT_ALL,
} from './of-messages.js';

const skip = ovsAvailable() ? false : 'Open vSwitch (ovsdb-server, ovs-vswitchd) is not installed';

describe('a real switch', { skip }, () => {
  const sw = new OpenflowSwitch();
  let conn: OpenflowConnection;
  let conn10: OpenflowConnection;

  before(async () => {
    await sw.start();
    conn = OpenflowConnection.open({ target: sw.target });
    conn10 = OpenflowConnection.open({ target: sw.target, version: OFP10_VERSION });
    await Promise.all([conn.waitUp(10_000), conn10.waitUp(10_000)]);
  });
  after(async () => {
    await conn?.close();
    await conn10?.close();
    await sw.cleanup();
  });

  /** Deletes every flow (table=all), so each test starts from an empty table. */
  const clearFlows = () => conn.transact([flowMod({ tableId: OFPTT_ALL, command: OFPFC_DELETE })]);

  // Depends on: connection.ts (HELLO with version bitmap, FEATURES_REQUEST before "connected"), features.ts.
  test('HELLO negotiates 1.3; FEATURES_REPLY carries the datapath id ovs-vsctl reports', async () => {
    assert.equal(conn.connected, true);
    assert.equal(conn.version, 0x04);
    const f = conn.features;
    assert.ok(f);
    assert.equal(datapathIdText(f.datapathId), await sw.datapathId());
    assert.ok(f.nTables >= 1, `n_tables ${f.nTables}`);
    assert.equal(f.auxiliaryId, 0);
    assert.equal(conn.stats.connects, 1);
  });

  // Depends on: connection.ts request() matched by xid (ECHO, BARRIER, FEATURES).
  test('ECHO, BARRIER and FEATURES requests get their replies', async () => {
    const data = Buffer.from('podwire echo');
    assert.deepEqual(await conn.request(OFPT13.ECHO_REQUEST, data), data);
    assert.equal((await conn.request(OFPT13.BARRIER_REQUEST)).length, 0);
    const features = await conn.request(OFPT13.FEATURES_REQUEST);
    assert.equal(features.readBigUInt64BE(0), conn.features?.datapathId);
    // Many at once, each answered to its own caller.
    const echoes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => conn.request(OFPT13.ECHO_REQUEST, Buffer.from(`e${i}`))),
    );
    assert.deepEqual(
      echoes.map((e) => e.toString()),
      Array.from({ length: 300 }, (_, i) => `e${i}`),
    );
  });

  // Depends on: connection.ts multipart(), multipart.ts (DESC, PORT_DESC decoders).
  test('MULTIPART: DESC, PORT_DESC, and flow stats of an empty table', async () => {
    const [desc] = await conn.multipart(OFPMP.DESC);
    assert.ok(desc);
    assert.match(decodeDesc(desc).mfrDesc, /Nicira/);
    const ports = decodePortDesc(Buffer.concat(await conn.multipart(OFPMP.PORT_DESC)));
    assert.deepEqual(ports.map((p) => p.name).sort(), [sw.bridge, sw.port].sort());
    await clearFlows();
    const flows = await conn.multipart(OFPMP.FLOW, flowStatsRequestBody());
    assert.equal(Buffer.concat(flows).length, 0, 'no flow stats in an empty table');
  });

  // Depends on: port-stats.ts (request body, 112-byte entries), connection.ts multipart().
  test('MULTIPART: port stats of every port and of one, counting what the switch sent out', async () => {
    const all = decodePortStatsReply(await conn.multipart(OFPMP_PORT_STATS, encodePortStatsRequest()));
    const ports = decodePortDesc(Buffer.concat(await conn.multipart(OFPMP.PORT_DESC)));
    assert.deepEqual(
      all.map((s) => s.portNo).sort(),
      ports.map((p) => p.portNo).sort(),
      'one entry per port',
    );
    const port = ports.find((p) => p.name === sw.port);
    assert.ok(port);
    const one = async () => {
      const [s, ...rest] = decodePortStatsReply(
        await conn.multipart(OFPMP_PORT_STATS, encodePortStatsRequest(port.portNo)),
      );
      assert.ok(s && rest.length === 0, 'exactly the port asked for');
      assert.equal(s.portNo, port.portNo);
      return s;
    };
    const before = await one();
    // Three frames out of the port, injected by ovs-ofctl: sent (or dropped, the tap being down).
    const frame = `ffffffffffff02000000000108004500001c0001000040110000c0a80001c0a800020000000000080000`;
    for (let i = 0; i < 3; i++) {
      await sw.ofctl(
        'OpenFlow13',
        'packet-out',
        `in_port=controller packet=${frame} actions=output:${port.portNo}`,
      );
    }
    const after = await one();
    assert.equal(after.txPackets + after.txDropped - (before.txPackets + before.txDropped), 3n);
    // The same counter as ovs-ofctl reads it.
    const text = await sw.ofctl('OpenFlow13', 'dump-ports', String(port.portNo));
    const tx = /tx pkts=(\d+), bytes=\d+, drop=(\d+)/.exec(text);
    assert.ok(tx, text);
    assert.equal(BigInt(tx[1] as string) + BigInt(tx[2] as string), after.txPackets + after.txDropped);
  });

  // Depends on: connection.ts bundle(), bundle.ts (ONF EXT-230 on 1.3).
  test('a bundle commits a FLOW_MOD', async () => {
    await clearFlows();
    await conn.bundle([flowMod({ priority: 0 }), flowMod({ priority: 7, cookie: 0x42n })]);
    assert.deepEqual(await sw.flows(), ['cookie=0x42, priority=7 actions=drop', 'priority=0 actions=drop']);
    const stats = Buffer.concat(await conn.multipart(OFPMP.FLOW, flowStatsRequestBody()));
    assert.ok(stats.length >= 2 * 56, `two ofp_flow_stats, got ${stats.length} bytes`);
  });

  // Depends on: port-mod-of10.ts (OF1.0 PORT_MOD, FEATURES_REPLY ports) over a 1.0 connection.
  test('OpenFlow 1.0: the no-flood bit is set, read back, and cleared', async () => {
    assert.equal(conn10.version, OFP10_VERSION);
    assert.equal(await noFlood(conn10, sw.port), false);
    await setNoFlood(conn10, sw.port);
    assert.equal(await noFlood(conn10, sw.port), true);
    const show = await sw.ofctl('OpenFlow10', 'show');
    const block = show.slice(show.indexOf(`(${sw.port})`));
    assert.match(block.split('\n')[1] ?? '', /config:.*\bNO_FLOOD\b/, show);
    await setNoFlood(conn10, sw.port, false);
    assert.equal(await noFlood(conn10, sw.port), false);
    const after = await sw.ofctl('OpenFlow10', 'show');
    assert.doesNotMatch(after.slice(after.indexOf(`(${sw.port})`)).split('\n')[1] ?? '', /NO_FLOOD/);
    const [desc10] = await conn10.multipart(0); // OFPST_DESC over 1.0's STATS_REQUEST
    assert.match(decodeDesc(desc10 as Buffer).mfrDesc, /Nicira/);
    const ports = await ports10(conn10);
    assert.ok(
      ports.some((p) => p.name === sw.bridge && p.portNo === 0xfffe),
      'the LOCAL port',
    );
  });

  // Depends on: error-msg.ts (decode, spec names), connection.ts request().
  test('an ERROR names the request that caused it: a message type the switch does not know', async () => {
    const err = await conn.request(99).then(
      () => assert.fail('resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof OpenflowError, String(err));
    assert.equal(err.errorType, OFPET13.BAD_REQUEST);
    assert.match(err.message, /OFPET_BAD_REQUEST\/OFPBRC_BAD_TYPE/);
    assert.equal(err.request.type, 99);
    assert.ok(err.data.length >= 8 && err.data.readUInt8(1) === 99, 'data holds the failing request');
  });

  // Depends on: connection.ts transact() (errors by xid, BARRIER).
  test('transact(): the first failing message is named by index; the others before it apply', async (t) => {
    await clearFlows();
    const err = await conn
      .transact([flowMod({ priority: 1 }), flowMod({ tableId: 255, priority: 2 }), flowMod({ priority: 3 })])
      .then(
        () => assert.fail('resolved'),
        (e: unknown) => e,
      );
    assert.ok(err instanceof OpenflowError, String(err));
    t.diagnostic(err.message);
    assert.equal(err.request.index, 1);
    assert.equal(err.request.type, OFPT13.FLOW_MOD);
    assert.match(err.message, /message 1\b/);
    assert.match(err.message, /OFPT_FLOW_MOD/);
    // transact() is not atomic: OVS applied the valid messages around the failing one.
    assert.deepEqual(await sw.flows(), ['priority=1 actions=drop', 'priority=3 actions=drop']);
  });

  // Depends on: connection.ts bundle() (ADD errors, CLOSE then DISCARD), bundle.ts.
  test('bundle(): an invalid message fails the bundle with its index, and nothing is applied', async (t) => {
    await clearFlows();
    await conn.transact([flowMod({ priority: 9, cookie: 0x9n })]);
    const before = await sw.flows();
    const err = await conn.bundle([flowMod({ priority: 5, cookie: 0x5n }), flowMod({ tableId: 255 })]).then(
      () => assert.fail('resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof OpenflowError, String(err));
    t.diagnostic(err.message);
    assert.equal(err.request.index, 1);
    assert.equal(err.request.type, OFPT13.FLOW_MOD);
    assert.deepEqual(await sw.flows(), before);
    // The connection is still good, and so are later bundles.
    await conn.bundle([flowMod({ priority: 5, cookie: 0x5n })]);
    assert.equal((await sw.flows()).length, 2);
  });

  // Depends on: connection.ts bundle() (an error at COMMIT, reported with the inner message's xid).
  test('bundle(): a message that fails only at commit is named by index, and the bundle is reverted', async (t) => {
    await clearFlows();
    await conn.transact([flowMod({ priority: 50, cookie: 0x50n })]);
    const before = await sw.flows();
    const err = await conn
      .bundle([
        flowMod({ priority: 60, cookie: 0x60n }),
        flowMod({ priority: 61, cookie: 0x61n }),
        flowMod({ priority: 50, inPort: 1, flags: OFPFF_CHECK_OVERLAP }),
      ])
      .then(
        () => assert.fail('resolved'),
        (e: unknown) => e,
      );
    assert.ok(err instanceof OpenflowError, String(err));
    t.diagnostic(err.message);
    assert.equal(err.request.index, 2, err.message);
    assert.match(err.message, /OFPET_FLOW_MOD_FAILED\/OFPFMFC_OVERLAP/);
    assert.deepEqual(await sw.flows(), before);
  });

  // Depends on: connection.ts (requests fail fast once closed).
  test('after close(), requests fail with a DatapathError, not NotAvailableError', async () => {
    const c = OpenflowConnection.open({ target: sw.target });
    await c.waitUp(5000);
    await c.close();
    await c.close();
    await assert.rejects(
      c.request(OFPT13.BARRIER_REQUEST),
      (e: Error) => !(e instanceof NotAvailableError) && /closed/.test(e.message),
    );
  });
});
