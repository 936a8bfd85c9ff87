/**
 * The flow text parser (the subset pipeline.ts writes; anything else a DecodeError naming the token),
 * the canonical key's normalisations, and diffFlowSets.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DecodeError } from '../../../../src/base/errors.js';
import { OFPP } from '../../../../src/datapath/ovs/openflow/actions.js';
import type { Flow } from '../../../../src/datapath/ovs/openflow/flow.js';
import { formatFlow } from '../../../../src/datapath/ovs/openflow/flow-format.js';
import { diffFlowSets, flowIdentityKey, flowKey } from '../../../../src/datapath/ovs/openflow/flow-key.js';
import { parseFlowText } from '../../../../src/datapath/ovs/openflow/flow-parse.js';
import { allCaseFlows } from './flow-cases.js';

const rejects = (text: string, token: RegExp) =>
  assert.throws(
    () => parseFlowText(text),
    (e: unknown) => e instanceof DecodeError && token.test(e.message),
    text,
  );

test('shorthands become explicit prerequisites, in the order OVS checks them', () => {
  const f = parseFlowText(
    'table=30,priority=200,cookie=0x2,nd_tll=0a:58:0a:f4:01:02,icmp6,in_port=7,icmp_type=136,icmp_code=0,nd_target=fd00::2 actions=goto_table:40',
  );
  // eth_type, in_port, ip_proto, icmpv6 type, icmpv6 code, nd_tll, nd_target (given order within a depth)
  assert.deepEqual(
    f.match.map((m) => m.field),
    [5, 0, 10, 29, 30, 33, 31],
  );
  assert.equal(f.table, 30);
  assert.equal(f.priority, 200);
  assert.equal(f.cookie, 2n);
  const arp = parseFlowText('arp,arp_op=1 actions=drop');
  assert.equal(arp.priority, 0x8000, 'OpenFlow default priority');
  assert.deepEqual(arp.instructions, []);
});

test('ct_state flags, vlan_tci as VLAN_VID with OFPVID_PRESENT, dl_dst with a mask', () => {
  const f = parseFlowText(
    'ct_state=+rpl+trk-new,vlan_tci=0x1000/0x1000,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=drop',
  );
  const [ct, vlan, dst] = f.match;
  assert.deepEqual([ct?.value.toString('hex'), ct?.mask?.toString('hex')], ['00000028', '00000029']);
  assert.deepEqual(
    [vlan?.oxmClass, vlan?.field, vlan?.value.toString('hex'), vlan?.mask?.toString('hex')],
    [0x8000, 6, '1000', '1000'],
  );
  assert.deepEqual([dst?.field, dst?.mask?.toString('hex')], [3, '010000000000']);
});

test('anything outside the subset is a DecodeError naming the token', () => {
  rejects('tcp,tp_dst=80 actions=ct(commit,nat)', /ct argument "nat"/);
  // tp_dst means the port of the protocol before it (tcp, udp, sctp): none there, no field.
  rejects('ip,tp_dst=80 actions=drop', /"tp_dst=80": needs tcp, udp or sctp/);
  rejects('icmp,tp_dst=80 actions=drop', /"tp_dst=80": needs tcp, udp or sctp/);
  rejects('ip actions=conjunction(1,3/2)', /needs 1 <= K <= N/);
  rejects('ip actions=conjunction(1,1/1)', /needs 1 <= K <= N and 2 <= N/);
  rejects('arp actions=resubmit(,10)', /"resubmit\(,10\)"/);
  rejects('arp actions=set_field:0x1/0x1->reg1', /masked set_field/);
  rejects('arp actions=set_field:1->nosuch', /unknown field nosuch/);
  rejects('arp actions=move:NXM_OF_ETH_SRC[]->NXM_NX_REG1[]', /source has 48 bits, destination 32/);
  rejects('arp actions=move:NXM_NX_REG1[0..40]->NXM_NX_REG2[0..40]', /outside NXM_NX_REG1/);
  rejects('arp actions=ct(commit,nat)', /ct argument "nat"/);
  rejects('arp actions=goto_table:50,output:1', /"output:1": comes after goto_table/);
  rejects('arp actions=drop,output:1', /"drop": drop must be the only action/);
  rejects('arp,in_port=70000000000 actions=drop', /wider than 32 bits/);
  rejects('arp,dl_src=0a:58 actions=drop', /not a MAC/);
  rejects('ip,nw_src=fd00::1 actions=drop', /not an IPv4 address/);
  rejects('arp,arp_op=1,arp_op=2 actions=drop', /arp_op is given twice/);
  rejects('arp,ct_state=+bogus actions=drop', /unknown flag/);
  rejects('arp', /no " actions="/);
  rejects('arp actions=ct(commit', /unbalanced/);
});

test('every prerequisite must be there: arp for arp_*, ip/ipv6 for addresses, icmp6 and type/code for nd_*', () => {
  rejects('arp_spa=10.0.0.1 actions=drop', /arp_spa.*needs arp/);
  rejects('ipv6,nw_src=10.0.0.1 actions=drop', /ipv4_src.*needs ip/);
  rejects('ip,ipv6_src=::1 actions=drop', /ipv6_src.*needs ipv6/);
  rejects('ipv6,icmp_type=135 actions=drop', /icmpv6_type.*needs icmp6/);
  rejects('icmp6,icmp_type=135,nd_target=::1 actions=drop', /nd_target.*needs/);
  rejects('icmp6,icmp_type=136,icmp_code=0,nd_sll=00:00:00:00:00:01 actions=drop', /nd_sll.*needs/);
  rejects('icmp6,icmp_type=135,icmp_code=0,nd_tll=00:00:00:00:00:01 actions=drop', /nd_tll.*needs/);
});

test('formatFlow writes ovs-ofctl syntax', () => {
  const text =
    'table=20,priority=200,cookie=0x100000000000000,arp,reg1=0,arp_tpa=10.244.1.1,arp_op=1 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:2->arp_op,IN_PORT';
  assert.equal(formatFlow(parseFlowText(text)), text);
  assert.equal(
    formatFlow(
      parseFlowText(
        'table=0,priority=265,cookie=0x1,in_port=3,vlan_tci=0x1000/0x1000 actions=move:NXM_OF_VLAN_TCI[0..11]->NXM_NX_REG1[0..11],pop_vlan,goto_table:50',
      ),
    ),
    'table=0,priority=265,cookie=0x1,in_port=3,vlan_tci=0x1000/0x1000 actions=move:NXM_OF_VLAN_TCI[0..11]->NXM_NX_REG1[0..11],pop_vlan,goto_table:50',
  );
  assert.equal(
    formatFlow(
      parseFlowText(
        'table=46,priority=220,cookie=0x1,ct_state=+new+trk,ip,in_port=1 actions=ct(commit,zone=65520,exec(set_field:0x1->ct_mark)),goto_table:50',
      ),
    ),
    'table=46,priority=220,cookie=0x1,ip,ct_state=+new+trk,in_port=1 actions=ct(commit,zone=65520,exec(set_field:0x1->ct_mark)),goto_table:50',
  );
});

test('every pipeline flow formats to text that parses back to the same key', () => {
  for (const text of allCaseFlows()) {
    const flow = parseFlowText(text);
    assert.equal(flowKey(parseFlowText(formatFlow(flow))), flowKey(flow), text);
  }
});

test('the key: an empty apply-actions is drop, goto_table after apply-actions, output max_len ignored but for CONTROLLER', () => {
  const drop = parseFlowText('table=10,priority=0,cookie=0x1 actions=drop');
  assert.equal(flowKey({ ...drop, instructions: [{ type: 'apply_actions', actions: [] }] }), flowKey(drop));
  const pass = parseFlowText(
    'table=40,priority=200,cookie=0x2,ip,nw_src=10.0.0.2 actions=set_field:0x64->reg1,goto_table:45',
  );
  assert.equal(flowKey({ ...pass, instructions: [...pass.instructions].reverse() }), flowKey(pass));
  const out = parseFlowText('table=50,priority=0,cookie=0x1 actions=output:7');
  const withLen: Flow = {
    ...out,
    instructions: [{ type: 'apply_actions', actions: [{ type: 'output', port: 7, maxLen: 128 }] }],
  };
  assert.equal(flowKey(withLen), flowKey(out));
  const ctl = (maxLen: number): Flow => ({
    ...out,
    instructions: [{ type: 'apply_actions', actions: [{ type: 'output', port: OFPP.CONTROLLER, maxLen }] }],
  });
  assert.notEqual(flowKey(ctl(128)), flowKey(ctl(0xffff)));
  assert.notEqual(
    flowKey(parseFlowText('table=50,priority=0,cookie=0x2 actions=output:7')),
    flowKey(out),
    'the cookie counts',
  );
});

test('diffFlowSets: missing and unexpected by key; a changed action is in both, with one identity', () => {
  const a = parseFlowText(
    'table=50,priority=200,cookie=0x1,reg1=0,dl_dst=0a:58:0a:f4:01:02 actions=output:7',
  );
  const b = parseFlowText(
    'table=50,priority=100,cookie=0x1,reg1=0,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=FLOOD',
  );
  const a2 = parseFlowText(
    'table=50,priority=200,cookie=0x1,dl_dst=0a:58:0a:f4:01:02,reg1=0 actions=output:8',
  );
  assert.deepEqual(diffFlowSets([a, b], [b, a]), { missing: [], unexpected: [] });
  const d = diffFlowSets([a, b], [b, a2]);
  assert.deepEqual(d.missing, [a]);
  assert.deepEqual(d.unexpected, [a2]);
  assert.equal(flowIdentityKey(a), flowIdentityKey(a2));
});
