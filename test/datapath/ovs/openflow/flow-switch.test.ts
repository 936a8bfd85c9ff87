/**
 * The flow codec against a real switch (a private ovs-vswitchd, userspace bridge, in a throwaway
 * namespace), through the native connection: every flow set pipeline.ts can produce is installed
 * as one bundle of our FLOW_MOD ADDs, dumped with OFPMP_FLOW and decoded, and what the switch returns
 * has the same canonical keys as what we sent (the property CHECK relies on). Also: flows installed
 * by `ovs-ofctl --bundle add-flows` have the same keys as ours; DELETE by cookie and DELETE_STRICT
 * remove exactly their flows; a native replace-flows (delete_strict the unexpected, add the missing,
 * one bundle) reaches the wanted set.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { must } from '../../../../bed/exec.js';
import { NamespaceSet } from '../../../../bed/namespaces.js';
import { OvsInstance, ovsAvailable } from '../../../../bed/ovs.js';
import { OpenflowConnection } from '../../../../src/datapath/ovs/openflow/connection.js';
import type { Flow } from '../../../../src/datapath/ovs/openflow/flow.js';
import { diffFlowSets, flowKey } from '../../../../src/datapath/ovs/openflow/flow-key.js';
import {
  encodeFlowMod,
  type FlowMod,
  flowAdd,
  flowDeleteAll,
  flowDeleteByCookie,
  flowDeleteStrict,
} from '../../../../src/datapath/ovs/openflow/flow-mod.js';
import { parseFlowText } from '../../../../src/datapath/ovs/openflow/flow-parse.js';
import {
  decodeFlowStatsReply,
  encodeFlowStatsRequest,
  type FlowStatsRequest,
  OFPMP_FLOW,
} from '../../../../src/datapath/ovs/openflow/flow-stats.js';
import { OFPT13 } from '../../../../src/datapath/ovs/openflow/header.js';
import { podCookie, podFlows } from '../../../../src/datapath/ovs/pipeline.js';
import { flowCases } from './flow-cases.js';

const BRIDGE = 'pwtfc0';
const skip = ovsAvailable() ? false : 'Open vSwitch (ovsdb-server, ovs-vswitchd) is not installed';

const msg = (m: FlowMod) => ({ type: OFPT13.FLOW_MOD, body: encodeFlowMod(m) });

describe('the flow codec against a real switch', { skip }, () => {
  const spaces = new NamespaceSet();
  let ovs: OvsInstance;
  let conn: OpenflowConnection;

  before(async () => {
    const ns = await spaces.add('ofcodec');
    ovs = await OvsInstance.start(ns);
    await ovs.vsctl(
      'add-br',
      BRIDGE,
      '--',
      'set',
      'Bridge',
      BRIDGE,
      'datapath_type=netdev',
      'fail_mode=secure',
      'protocols=OpenFlow13,OpenFlow14',
    );
    conn = OpenflowConnection.open({ target: ovs.target(BRIDGE) });
    await conn.waitUp(10_000);
  });
  after(async () => {
    await conn?.close();
    await ovs?.stop();
    await spaces.cleanup();
  });

  const dump = async (q: FlowStatsRequest = {}) =>
    decodeFlowStatsReply(await conn.multipart(OFPMP_FLOW, encodeFlowStatsRequest(q)));
  const clear = () => conn.transact([msg(flowDeleteAll())]);
  const assertSame = (want: Flow[], have: Flow[], what: string) => {
    const d = diffFlowSets(want, have);
    assert.deepEqual(
      { missing: d.missing.map(flowKey), unexpected: d.unexpected.map(flowKey) },
      { missing: [], unexpected: [] },
      what,
    );
    assert.equal(have.length, want.length, `${what}: one entry per flow`);
  };

  test('every pipeline flow set, installed as one bundle of our FLOW_MODs, dumps back with the same keys', async () => {
    for (const [name, texts] of flowCases()) {
      await clear();
      const want = texts.map(parseFlowText);
      await conn.bundle(want.map((f) => msg(flowAdd(f))));
      const have = await dump();
      assertSame(want, have, name);
      for (const s of have) assert.equal(s.packetCount, 0n, name);
    }
  });

  test('flows ovs-ofctl installs from the same text have the same keys as ours', async () => {
    for (const [name, texts] of flowCases()) {
      await clear();
      const file = join(ovs.dir, 'flows.txt');
      writeFileSync(file, `${texts.join('\n')}\n`);
      await must('ovs-ofctl', ['-O', 'OpenFlow14', '--bundle', 'add-flows', ovs.target(BRIDGE), file]);
      assertSame(texts.map(parseFlowText), await dump(), name);
    }
  });

  test('DELETE by cookie removes one pod, every table; DELETE_STRICT one flow; a dump by cookie sees one pod', async () => {
    await clear();
    const a = podFlows({
      ofport: 7,
      mac: '0a:58:0a:f4:01:02',
      ips: ['10.244.1.2', 'fd00::2'],
      cookie: podCookie('pwa'),
    });
    const b = podFlows({
      ofport: 8,
      mac: '0a:58:0a:f4:01:03',
      ips: ['10.244.1.3', 'fd00::3'],
      cookie: podCookie('pwb'),
    });
    const wantA = a.map(parseFlowText);
    const wantB = b.map(parseFlowText);
    await conn.bundle([...wantA, ...wantB].map((f) => msg(flowAdd(f))));
    assertSame(
      wantA,
      await dump({ cookie: podCookie('pwa'), cookieMask: 0xffff_ffff_ffff_ffffn }),
      'dump by cookie',
    );
    const table50 = await dump({ table: 50, cookie: podCookie('pwb'), cookieMask: 0xffff_ffff_ffff_ffffn });
    assertSame(
      wantB.filter((f) => f.table === 50),
      table50,
      'dump of one table',
    );
    await conn.transact([msg(flowDeleteByCookie(podCookie('pwa')))]);
    assertSame(wantB, await dump(), 'after DELETE by cookie');
    const [gone, ...rest] = wantB;
    assert.ok(gone);
    await conn.transact([msg(flowDeleteStrict(gone))]);
    assertSame(rest, await dump(), 'after DELETE_STRICT');
  });

  test('a native replace-flows: delete_strict the unexpected, add the missing, in one bundle', async () => {
    await clear();
    const cookie = podCookie('pwc');
    const mac = '0a:58:0a:f4:01:04';
    const before = podFlows({ ofport: 9, mac, ips: ['10.244.1.4'], cookie }).map(parseFlowText);
    const want = podFlows({ ofport: 9, mac, ips: ['10.244.1.4', 'fd00::4'], cookie, vlan: 100 }).map(
      parseFlowText,
    );
    await conn.bundle(before.map((f) => msg(flowAdd(f))));
    const d = diffFlowSets(want, await dump());
    assert.ok(d.missing.length > 0 && d.unexpected.length > 0);
    await conn.bundle([
      ...d.unexpected.map((f) => msg(flowDeleteStrict(f))),
      ...d.missing.map((f) => msg(flowAdd(f))),
    ]);
    assertSame(want, await dump(), 'after replace');
  });
});
