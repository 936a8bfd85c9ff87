/**
 * Golden test of the flow codec against OVS's own printer: every flow pipeline.ts can produce is
 * parsed (flow-parse.ts), encoded as OFPT_FLOW_MOD ADD (flow-mod.ts, header.ts) and printed by
 * `ovs-ofctl ofp-parse` (the binary messages, one file); the same flows as text go through
 * `ovs-ofctl -O OpenFlow13 parse-flows` (one file), which prints OVS's own encoding. The lines must be
 * equal, one for one: OVS reads our bytes as the flow it would have sent itself. Two processes in all.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { must } from '../../../../bed/exec.js';
import { ovsAvailable } from '../../../../bed/ovs.js';
import { parseDump, flowKey as textFlowKey } from '../../../../src/datapath/ovs/flow-text.js';
import { formatFlow, toFlowEntry } from '../../../../src/datapath/ovs/openflow/flow-format.js';
import { flowKey } from '../../../../src/datapath/ovs/openflow/flow-key.js';
import { decodeFlowMod, flowAddBody } from '../../../../src/datapath/ovs/openflow/flow-mod.js';
import { parseFlowText } from '../../../../src/datapath/ovs/openflow/flow-parse.js';
import {
  encodeFlowStats,
  type FlowStats,
  OFPMP_FLOW,
} from '../../../../src/datapath/ovs/openflow/flow-stats.js';
import {
  decodeHeader,
  encodeMessage,
  OFP13_VERSION,
  OFPT13,
} from '../../../../src/datapath/ovs/openflow/header.js';
import { allCaseFlows, flowCases } from './flow-cases.js';

const flows = allCaseFlows();

describe('flow codec against ovs-ofctl', { skip: !ovsAvailable() && 'Open vSwitch is not installed' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-ofcodec-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test(`every pipeline flow (${flows.length} in ${flowCases().size} sets) encodes to the FLOW_MOD ovs-ofctl makes of its text`, async () => {
    // xid i+1: parse-flows numbers its messages from 1.
    const messages = flows.map((text, i) =>
      encodeMessage(OFP13_VERSION, OFPT13.FLOW_MOD, i + 1, flowAddBody(parseFlowText(text))),
    );
    writeFileSync(join(dir, 'messages.bin'), Buffer.concat(messages));
    writeFileSync(join(dir, 'flows.txt'), `${flows.join('\n')}\n`);
    const ours = (await must('ovs-ofctl', ['ofp-parse', join(dir, 'messages.bin')])).trim().split('\n');
    const theirs = (await must('ovs-ofctl', ['-O', 'OpenFlow13', 'parse-flows', join(dir, 'flows.txt')]))
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('OFPT_FLOW_MOD'));
    assert.equal(ours.length, flows.length, 'one printed message per flow');
    assert.equal(theirs.length, flows.length);
    for (let i = 0; i < flows.length; i++) assert.equal(ours[i], theirs[i], `flow ${flows[i]}`);
    for (const line of ours) assert.doesNotMatch(line, /bad|error|\(\*\*\*/i);
  });

  test('each encoded FLOW_MOD decodes back to the parsed flow, and formatFlow parses back to the same key', () => {
    for (const text of flows) {
      const flow = parseFlowText(text);
      const message = encodeMessage(OFP13_VERSION, OFPT13.FLOW_MOD, 1, flowAddBody(flow));
      assert.equal(decodeHeader(message).length, message.length);
      const mod = decodeFlowMod(message.subarray(8));
      assert.deepEqual(
        {
          table: mod.table,
          priority: mod.priority,
          cookie: mod.cookie,
          match: mod.match,
          instructions: mod.instructions,
        },
        flow,
        text,
      );
      assert.equal(
        flowKey(parseFlowText(formatFlow(flow))),
        flowKey(flow),
        `${text}\n-> ${formatFlow(flow)}`,
      );
    }
  });

  test('a flow stats reply of every pipeline flow, as ovs-ofctl prints it, is what toFlowEntry makes of it (flow-text.ts key)', async () => {
    const stats: FlowStats[] = flows.map((text, i) => ({
      ...parseFlowText(text),
      durationSec: i,
      durationNsec: 0,
      idleTimeout: 0,
      hardTimeout: 0,
      flags: 0,
      packetCount: BigInt(i * 3),
      byteCount: BigInt(i * 300),
    }));
    const head = Buffer.alloc(8);
    head.writeUInt16BE(OFPMP_FLOW, 0);
    // One reply message per 50 entries (a message is at most 64 KiB).
    const messages: Buffer[] = [];
    for (let i = 0; i < stats.length; i += 50) {
      const body = Buffer.concat([head, ...stats.slice(i, i + 50).map(encodeFlowStats)]);
      messages.push(encodeMessage(OFP13_VERSION, OFPT13.MULTIPART_REPLY, i + 1, body));
    }
    writeFileSync(join(dir, 'replies.bin'), Buffer.concat(messages));
    const printed = parseDump(await must('ovs-ofctl', ['ofp-parse', join(dir, 'replies.bin')]));
    assert.equal(printed.length, stats.length);
    stats.forEach((s, i) => {
      const theirs = printed[i];
      assert.ok(theirs);
      assert.equal(textFlowKey(toFlowEntry(s)), textFlowKey(theirs), flows[i]);
      assert.equal(theirs.packets, Number(s.packetCount));
    });
  });
});
