/**
 * The pipeline as text: which flows a pod gets per address family, cookies, the EUI-64 link-local,
 * and the flow parser that compares generated flows with what ovs-ofctl prints.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { eui64LinkLocal } from '../../../src/base/mac.js';
import { diffFlows, flowKey, parseDump, parseFlow } from '../../../src/datapath/ovs/flow-text.js';
import {
  CT_ZONE,
  cookieText,
  isPodCookie,
  PIPELINE_COOKIE,
  pipelineFlows,
  podCookie,
  podFlows,
  TABLE,
  vlanCookie,
  vlanFloodFlow,
} from '../../../src/datapath/ovs/pipeline.js';

const MAC = '0a:58:0a:f4:01:02';
const byTable = (flows: string[]) => {
  const out = new Map<number, number>();
  for (const f of flows.map(parseFlow)) out.set(f.table, (out.get(f.table) ?? 0) + 1);
  return Object.fromEntries(out);
};

describe('pod flows', () => {
  const cookie = podCookie('pw0123456789abc');

  test('IPv4 only: two ARP guards (own address; 0.0.0.0, a probe for the own address), one IP guard, one L2 flow, all with the pod cookie', () => {
    const flows = podFlows({ ofport: 7, mac: MAC, ips: ['10.244.1.2'], cookie });
    assert.match(flows.join('\n'), /arp_spa=0\.0\.0\.0,arp_tpa=10\.244\.1\.2,arp_sha=0a:58:0a:f4:01:02/);
    assert.deepEqual(byTable(flows), {
      [TABLE.ARP_SPOOF_GUARD]: 2,
      [TABLE.IP_SPOOF_GUARD]: 1,
      [TABLE.L2_FORWARDING]: 1,
    });
    const arp = parseFlow(flows[0] as string);
    assert.deepEqual(arp.match.sort(), [
      'arp',
      'arp_sha=0a:58:0a:f4:01:02',
      'arp_spa=10.244.1.2',
      `dl_src=${MAC}`,
      'in_port=7',
    ]);
    assert.equal(arp.actions, `goto_table:${TABLE.ARP_RESPONDER}`);
    for (const f of flows.map(parseFlow)) assert.equal(f.cookie, cookie);
  });

  test('IPv6 only: ND guard for NA (own target, own or no TLL) and NS (own SLL; no SLL only from :: with an own target), no ARP', () => {
    const flows = podFlows({ ofport: 7, mac: MAC, ips: ['fd00:10:244:1:0:0:0:2'], cookie });
    assert.deepEqual(byTable(flows), {
      [TABLE.ND_GUARD]: 8,
      [TABLE.IP_SPOOF_GUARD]: 3,
      [TABLE.L2_FORWARDING]: 1,
    });
    const text = flows.join('\n');
    assert.match(text, /nd_target=fd00:10:244:1::2,nd_tll=0a:58:0a:f4:01:02/);
    assert.match(text, /nd_target=fe80::858:aff:fef4:102,nd_tll=00:00:00:00:00:00/);
    assert.match(text, /icmp_type=135,icmp_code=0,nd_sll=0a:58:0a:f4:01:02/);
    // OVS reads nd_sll=00:00:00:00:00:00 for an NS without SLL and for one with a duplicated SLL (Linux
    // takes the first): only DAD, from ::, may send one, and only for its own addresses (decision 27).
    const ns = flows.map(parseFlow).filter((f) => f.match.includes('icmp_type=135'));
    assert.deepEqual(
      ns.map((f) =>
        f.match.filter(
          (m) => m.startsWith('ipv6_src=') || m.startsWith('nd_sll=') || m.startsWith('nd_target='),
        ),
      ),
      [
        ['ipv6_src=fd00:10:244:1::2', 'nd_sll=0a:58:0a:f4:01:02'],
        ['ipv6_src=fe80::858:aff:fef4:102', 'nd_sll=0a:58:0a:f4:01:02'],
        ['ipv6_src=::', 'nd_target=fd00:10:244:1::2', 'nd_sll=00:00:00:00:00:00'],
        ['ipv6_src=::', 'nd_target=fe80::858:aff:fef4:102', 'nd_sll=00:00:00:00:00:00'],
      ],
    );
    assert.doesNotMatch(text, /arp/);
  });

  test('dual stack is the union of both families', () => {
    const flows = podFlows({ ofport: 7, mac: MAC, ips: ['10.244.1.2', 'fd00:10:244:1::2'], cookie });
    assert.equal(flows.length, 4 + 12 - 1);
  });
});

test('pipeline flows: every table ends in a counted default; the gateway may ARP only as itself', () => {
  const flows = pipelineFlows({ ofport: 1, mac: '02:AA:BB:CC:DD:EE', ipv4s: ['10.244.1.1'] }).map(parseFlow);
  for (const t of Object.values(TABLE)) {
    assert.ok(
      flows.some((f) => f.table === t && f.priority === 0 && f.match.length === 0),
      `table ${t} default`,
    );
  }
  const guard = flows.filter((f) => f.table === TABLE.ARP_SPOOF_GUARD && f.priority > 0);
  assert.deepEqual(
    guard.map((f) => f.match.sort()),
    [['arp', 'arp_sha=02:aa:bb:cc:dd:ee', 'arp_spa=10.244.1.1', 'dl_src=02:aa:bb:cc:dd:ee', 'in_port=1']],
  );
  assert.ok(flows.every((f) => f.cookie === PIPELINE_COOKIE));
  const gwPass = flows.find((f) => f.table === TABLE.CLASSIFIER && f.match.includes('in_port=1'));
  for (const [proto, ports] of [
    ['udp', 'tp_dst=68'],
    ['udp6', 'tp_dst=546'],
  ]) {
    const dhcp = flows.find((f) => f.table === TABLE.CLASSIFIER && f.match.join(',') === `${proto},${ports}`);
    assert.equal(
      dhcp?.actions,
      'drop',
      `a DHCP server's message to a client (${proto}) from a pod is dropped`,
    );
    assert.ok((gwPass?.priority ?? 0) > (dhcp?.priority ?? 0), 'but not from the gateway');
  }
  for (const type of [133, 134, 137]) {
    const ra = flows.find((f) => f.table === TABLE.CLASSIFIER && f.match.includes(`icmp_type=${type}`));
    assert.equal(ra?.actions, 'drop', `ICMPv6 type ${type} from a pod is dropped`);
    assert.ok((gwPass?.priority ?? 0) > (ra?.priority ?? 0), 'but not from the gateway');
  }
  const v6only = pipelineFlows({ ofport: 1, mac: '02:aa:bb:cc:dd:ee', ipv4s: [] }).map(parseFlow);
  assert.ok(
    !v6only.some((f) => f.table === TABLE.ARP_SPOOF_GUARD && f.priority > 0),
    'no gateway ARP without IPv4',
  );
});

test('conntrack: connections from the gateway are marked, their replies from pods go back to the gateway', () => {
  const gwMac = '02:aa:bb:cc:dd:ee';
  const flows = pipelineFlows({ ofport: 1, mac: gwMac, ipv4s: ['10.244.1.1'] }).map(parseFlow);
  const gwPass = flows.find((f) => f.table === TABLE.CLASSIFIER && f.match.includes('in_port=1'));
  assert.equal(
    gwPass?.actions,
    `set_field:0x1->reg2,goto_table:${TABLE.CT_LOOKUP}`,
    "the gateway's frames meet conntrack, marked as the underlay's side (decision 30)",
  );
  const lookups = flows.filter((f) => f.table === TABLE.CT_LOOKUP && f.priority > 0);
  assert.deepEqual(
    lookups.map((f) => [f.match.join(), f.actions]),
    [
      ['ip', `ct(table=${TABLE.GATEWAY_CT},zone=${CT_ZONE})`],
      ['ipv6', `ct(table=${TABLE.GATEWAY_CT},zone=${CT_ZONE})`],
    ],
  );
  const ct = flows.filter((f) => f.table === TABLE.GATEWAY_CT && f.priority > 0);
  const commits = ct.filter((f) => f.actions.startsWith('ct(commit'));
  assert.equal(commits.length, 2);
  for (const f of commits) {
    assert.ok(
      f.match.includes('ct_state=+new+trk') && f.match.includes('in_port=1'),
      'only new, only from the gateway',
    );
    assert.equal(
      f.actions,
      `ct(commit,zone=${CT_ZONE},exec(set_field:0x1->ct_mark)),goto_table:${TABLE.L2_FORWARDING}`,
    );
  }
  const toGw = ct.filter((f) => f.actions.startsWith('set_field'));
  assert.deepEqual(toGw.map((f) => f.match.filter((m) => m.startsWith('ct_')).join()).sort(), [
    'ct_state=+rel+trk,ct_mark=0x1',
    'ct_state=+rel+trk,ct_mark=0x1',
    'ct_state=+rpl+trk,ct_mark=0x1',
    'ct_state=+rpl+trk,ct_mark=0x1',
  ]);
  for (const f of toGw) {
    assert.equal(f.actions, `set_field:${gwMac}->eth_dst,goto_table:${TABLE.L2_FORWARDING}`);
    assert.ok(f.match.includes('reg1=0'), 'never a pod of a VLAN');
  }
  const own = ct.find((f) => f.match.join() === 'in_port=1');
  assert.ok(
    own &&
      own.priority < Math.min(...commits.map((f) => f.priority)) &&
      own.priority > Math.max(...toGw.map((f) => f.priority)),
    "the gateway's established packets pass unchanged",
  );
  const pod = podFlows({ ofport: 7, mac: MAC, ips: ['10.244.1.2', 'fd00::2'], cookie: podCookie('x') }).map(
    parseFlow,
  );
  const guards = pod.filter((f) => f.table === TABLE.IP_SPOOF_GUARD);
  assert.ok(guards.length > 0);
  for (const f of guards)
    assert.equal(f.actions, `goto_table:${TABLE.CT_LOOKUP}`, 'guarded first, then conntrack');
});

test('bridging mode: the node IP is a pair of the gateway; the underlay is forwarded, not guarded', () => {
  const mac = '52:54:00:12:34:56';
  const flows = pipelineFlows({ ofport: 1, mac, ipv4s: ['10.244.1.1', '172.30.0.10'], uplinkOfport: 2 }).map(
    parseFlow,
  );
  const guard = flows.filter((f) => f.table === TABLE.ARP_SPOOF_GUARD && f.priority > 0);
  assert.deepEqual(guard.map((f) => f.match.find((m) => m.startsWith('arp_spa='))).sort(), [
    'arp_spa=10.244.1.1',
    'arp_spa=172.30.0.10',
  ]);
  // Only the gateway's MAC (the uplink's, in bridging mode) may carry them.
  assert.ok(guard.every((f) => f.match.includes(`arp_sha=${mac}`) && f.match.includes('in_port=1')));
  const responder = flows.filter((f) => f.table === TABLE.ARP_RESPONDER && f.priority === 200);
  assert.deepEqual(
    responder.map((f) => f.match.find((m) => m.startsWith('arp_tpa='))),
    ['arp_tpa=10.244.1.1'],
    'the responder answers pods for the pod gateway only',
  );
  const fromUplink = flows.filter((f) => f.table === TABLE.CLASSIFIER && f.match.includes('in_port=2'));
  assert.deepEqual(
    fromUplink.map((f) => [f.match.includes('vlan_tci=0x1000/0x1000'), f.actions]),
    [
      [
        true,
        `move:NXM_OF_VLAN_TCI[0..11]->NXM_NX_REG1[0..11],pop_vlan,set_field:0x3->reg2,goto_table:${TABLE.L2_FORWARDING}`,
      ],
      [false, `set_field:0x3->reg2,goto_table:${TABLE.L2_FORWARDING}`],
    ],
    'tagged frames carry their VLAN in reg1, untagged ones 0; reg2 says: from the uplink',
  );
  assert.ok(
    fromUplink.every((f) => f.priority > 250),
    'before the ARP guard: the underlay is not ours to guard',
  );
  const tagged = flows.find(
    (f) => f.table === TABLE.CLASSIFIER && f.match.join() === 'vlan_tci=0x1000/0x1000',
  );
  assert.equal(tagged?.actions, 'drop', 'a tag from any other port is dropped');
  assert.ok(
    (tagged?.priority ?? 0) > 250 && fromUplink.every((f) => f.priority > (tagged?.priority ?? 0)),
    'after the uplink, before every guard',
  );
  const out = flows.filter(
    (f) => f.table === TABLE.L2_FORWARDING && f.actions.endsWith('output:2') && !f.actions.includes('FLOOD'),
  );
  assert.deepEqual(
    out.map((f) => [f.match.join(), f.actions]),
    [
      ['reg1=0,reg2=0x1/0x1', 'output:2'],
      ['', 'push_vlan:0x8100,move:NXM_NX_REG1[0..11]->NXM_OF_VLAN_TCI[0..11],output:2'],
    ],
    "unknown unicast of the underlay's side leaves through the uplink, tagged again when it came from a VLAN",
  );
  assert.ok(out.every((f) => f.priority > 0 && f.priority < 100));
  // A plain pod's (reg2=0): dropped before the VLAN flow, and its multicast floods without the uplink.
  const plainDrop = flows.find((f) => f.table === TABLE.L2_FORWARDING && f.match.join() === 'reg1=0');
  assert.equal(plainDrop?.actions, 'drop');
  assert.ok(
    (plainDrop?.priority ?? 0) < (out[0]?.priority ?? 0) &&
      (plainDrop?.priority ?? 0) > (out[1]?.priority ?? 0),
  );
  const floods = flows.filter((f) => f.table === TABLE.L2_FORWARDING && f.actions.includes('FLOOD'));
  assert.deepEqual(
    floods.map((f) => [f.priority, f.match.filter((m) => m.startsWith('reg')).join(), f.actions]),
    [
      [100, 'reg1=0', 'FLOOD'],
      [105, 'reg1=0,reg2=0x1', 'FLOOD,output:2'],
    ],
    "multicast of the underlay's side names the uplink (no-flood); a plain pod's FLOOD does not reach it",
  );
  const plain = pipelineFlows({ ofport: 1, mac, ipv4s: ['10.244.1.1'] });
  assert.ok(!plain.join('\n').includes('output:2'), 'no uplink flow without bridging');
});

test('a pod of a VLAN: its guards record the VLAN in reg1, and it receives only frames of that VLAN', () => {
  const flows = podFlows({
    ofport: 7,
    mac: MAC,
    ips: ['10.244.1.2', 'fd00::2'],
    cookie: podCookie('pwv'),
    vlan: 100,
  }).map(parseFlow);
  const passes = flows.filter((f) => f.actions.includes('goto_table') && f.table !== TABLE.ND_GUARD);
  assert.ok(passes.length > 0);
  for (const f of passes)
    assert.match(f.actions, /^set_field:0x1->reg2,set_field:0x64->reg1,goto_table:\d+$/);
  const l2 = flows.filter((f) => f.table === TABLE.L2_FORWARDING);
  assert.deepEqual(
    l2.map((f) => f.match.sort()),
    [['dl_dst=0a:58:0a:f4:01:02', 'reg1=0x64']],
  );
  const untagged = podFlows({ ofport: 7, mac: MAC, ips: ['10.244.1.2'], cookie: podCookie('pwv') }).map(
    parseFlow,
  );
  assert.ok(
    untagged.every((f) => !f.actions.includes('reg1')),
    'an untagged pod leaves reg1 at 0',
  );
  assert.ok(untagged.some((f) => f.table === TABLE.L2_FORWARDING && f.match.includes('reg1=0')));
});

test('a VLAN multicast flow: its local pods, then the uplink with the tag', () => {
  const f = parseFlow(vlanFloodFlow(100, [3, 5], 2));
  assert.equal(f.table, TABLE.L2_FORWARDING);
  assert.ok(f.match.includes('reg1=0x64'));
  assert.equal(f.cookie, vlanCookie(100));
  assert.equal(f.actions, 'output:3,output:5,push_vlan:0x8100,set_field:4196->vlan_vid,output:2');
  assert.equal(parseFlow(vlanFloodFlow(7, [3])).actions, 'output:3', 'without bridging: local pods only');
  const pipe = pipelineFlows({ ofport: 1, mac: MAC, ipv4s: ['10.244.1.1'] }).map(parseFlow);
  const flood = pipe.find((x) => x.actions === 'FLOOD');
  assert.ok(flood?.match.includes('reg1=0'), 'FLOOD is for untagged frames only');
  assert.ok((flood?.priority ?? 0) < f.priority);
});

test('pod cookies are tagged, stable per host interface, and distinct', () => {
  fc.assert(
    fc.property(
      fc.string({ minLength: 1, maxLength: 15 }),
      fc.string({ minLength: 1, maxLength: 15 }),
      (a, b) => {
        assert.ok(isPodCookie(podCookie(a)));
        assert.equal(podCookie(a), podCookie(a));
        if (a !== b) assert.notEqual(podCookie(a), podCookie(b));
      },
    ),
    { numRuns: 200 },
  );
  assert.ok(!isPodCookie(PIPELINE_COOKIE));
  assert.match(cookieText(podCookie('x')), /^0x2[0-9a-f]{14}$/);
});

test('EUI-64 link-local addresses match the kernel (fe80 + MAC with U/L bit flipped + ff:fe)', () => {
  assert.equal(eui64LinkLocal('9a:51:45:e5:aa:19'), 'fe80::9851:45ff:fee5:aa19');
  assert.equal(eui64LinkLocal('02:00:00:00:00:01'), 'fe80::ff:fe00:1');
  assert.throws(() => eui64LinkLocal('zz:00:00:00:00:01'));
});

test('a dump-flows line parses to the flow podwire wrote (statistics aside)', () => {
  const dump = `OFPST_FLOW reply (OF1.5) (xid=0x2):
 cookie=0x218497cac75c5f0, duration=0.214s, table=10, n_packets=4, n_bytes=168, idle_age=0, priority=200,arp,in_port=2,dl_src=0a:58:0a:f4:01:02,arp_spa=10.244.1.2,arp_sha=0a:58:0a:f4:01:02 actions=goto_table:20
 cookie=0x100000000000000, duration=0.276s, n_packets=0, n_bytes=0, idle_age=0, priority=0 actions=drop
`;
  const [pod, drop] = parseDump(dump);
  assert.equal(pod?.packets, 4);
  assert.equal(pod?.bytes, 168);
  assert.equal(drop?.table, 0);
  const wrote = podFlows({
    ofport: 2,
    mac: MAC,
    ips: ['10.244.1.2'],
    cookie: 0x218497cac75c5f0n,
  })[0] as string;
  assert.equal(flowKey(parseFlow(wrote)), flowKey(pod as never));
  assert.deepEqual(diffFlows([parseFlow(wrote)], [pod as never]), { missing: [], unexpected: [] });
  assert.equal(diffFlows([parseFlow(wrote)], []).missing.length, 1);
  assert.throws(() => parseFlow('priority=1,arp'), /not a flow/);
});
