/**
 * The spoof guards of the OVS pipeline (docs/architecture.md: I5 and failure 2), with frames forged by scapy
 * inside a pod: ARP claiming another pod's IP or the gateway's IP, ARP with a forged sender MAC, IPv4
 * and IPv6 with a forged source, an NA for another pod's address. For each: the neighbour pod's
 * capture sees none of it, the guard's drop flow counts it, and the same frame with the pod's true
 * identity does arrive (so the capture works). Then the gateway: ARP from the node with another of the
 * node's addresses as sender never leaves the bridge, while the gateway's own ARP does.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must } from '../../../bed/exec.js';
import { resultIps, TestNode } from '../../../bed/node.js';
import { OVS_DATAPATH } from '../../../bed/ovs.js';
import { eui64LinkLocal } from '../../../src/base/mac.js';
import { counterReaches, dropped, dumpFlows, podMacOf, TABLE } from './ovs-node.js';
import { ScapySender, scapyAvailable } from './scapy-sender.js';
import { capture } from './traffic.js';

const BCAST = 'ff:ff:ff:ff:ff:ff';
const FORGED_MAC = '02:de:ad:be:ef:01';
const GW4 = '10.244.8.1';
const NODE_OTHER_IP = '192.168.250.10';

interface Pod {
  ns: string;
  mac: string;
  v4: string;
  v6: string;
}

describe(`OVS spoof guards (${OVS_DATAPATH})`, {
  skip: !scapyAvailable() && 'python3-scapy is not installed',
}, () => {
  const node = new TestNode({ datapath: 'ovs', podCIDRs: ['10.244.8.0/24', 'fd00:10:244:8::/64'] });
  let attacker: Pod;
  let neighbour: Pod;
  let scapy: ScapySender;

  async function addPod(id: string): Promise<Pod> {
    const ns = await node.addPod(id);
    const add = await node.cni({ command: 'ADD', containerId: id, netns: ns });
    assert.equal(add.code, 0, add.stdout);
    const [v4, v6] = resultIps(add) as [string, string];
    return { ns, mac: podMacOf(add), v4, v6 };
  }

  before(async () => {
    await node.setup();
    attacker = await addPod('attacker');
    neighbour = await addPod('neighbour');
    scapy = await ScapySender.start(attacker.ns);
  });
  after(async () => {
    await scapy?.close();
    await node.cleanup();
  });

  /**
   * Sends `forged` (3 copies) and then `genuine` (1 copy) from the attacker while the neighbour
   * captures; returns the captured lines, and checks that `table` dropped at least the 3 forged ones.
   */
  async function attempt(table: number, forged: string, genuine: string, filter: string): Promise<string[]> {
    const before = await dropped(node, table);
    const cap = await capture(neighbour.ns, 'eth0', filter);
    await scapy.send(forged, 3);
    await scapy.send(genuine, 1);
    const lines = await cap.stop();
    const after = await counterReaches(() => dropped(node, table), before + 3);
    assert.ok(after >= before + 3, `table ${table} dropped ${after - before} frames, want >= 3`);
    return lines;
  }

  const arp = (src: string, hwsrc: string, psrc: string, pdst: string, op = 1) =>
    `Ether(src='${src}', dst='${BCAST}')/ARP(op=${op}, hwsrc='${hwsrc}', psrc='${psrc}', pdst='${pdst}')`;

  test("ARP claiming another pod's IP is dropped", async () => {
    const a = attacker;
    const lines = await attempt(
      TABLE.ARP_SPOOF_GUARD,
      arp(a.mac, a.mac, neighbour.v4, GW4, 2),
      arp(a.mac, a.mac, a.v4, GW4, 2),
      'arp',
    );
    assert.ok(
      lines.some((l) => l.includes(`${a.v4} is-at ${a.mac}`)),
      `genuine ARP arrives:\n${lines.join('\n')}`,
    );
    assert.ok(
      !lines.some((l) => l.includes(`${neighbour.v4} is-at`)),
      `forged ARP seen:\n${lines.join('\n')}`,
    );
  });

  test('a frame a pod tags itself (802.1Q) is dropped, whatever it carries', async () => {
    const a = attacker;
    const cap = await capture(neighbour.ns, 'eth0', 'arp or vlan');
    // Its own addresses, inside a tag: the guards alone (which match the inner ethertype) would pass it.
    await scapy.send(
      `Ether(src='${a.mac}', dst='${BCAST}')/Dot1Q(vlan=100)/ARP(op=1, hwsrc='${a.mac}', psrc='${a.v4}', pdst='${neighbour.v4}')`,
      3,
    );
    await scapy.send(arp(a.mac, a.mac, a.v4, neighbour.v4), 1);
    const lines = await cap.stop();
    assert.ok(
      lines.some((l) => l.includes(`who-has ${neighbour.v4} tell ${a.v4}`)),
      `the untagged ARP arrives:\n${lines.join('\n')}`,
    );
    assert.ok(!lines.some((l) => l.includes('vlan 100')), `tagged frame seen:\n${lines.join('\n')}`);
  });

  test("ARP claiming the gateway's IP is dropped", async () => {
    const a = attacker;
    const lines = await attempt(
      TABLE.ARP_SPOOF_GUARD,
      arp(a.mac, a.mac, GW4, neighbour.v4),
      arp(a.mac, a.mac, a.v4, neighbour.v4),
      'arp',
    );
    assert.ok(
      lines.some((l) => l.includes(`who-has ${neighbour.v4} tell ${a.v4}`)),
      lines.join('\n'),
    );
    assert.ok(!lines.some((l) => l.includes(`tell ${GW4}`)), `forged ARP seen:\n${lines.join('\n')}`);
  });

  test('ARP with a forged sender MAC (in the ARP header or the Ethernet header) is dropped', async () => {
    const a = attacker;
    const lines = await attempt(
      TABLE.ARP_SPOOF_GUARD,
      arp(a.mac, FORGED_MAC, a.v4, neighbour.v4),
      arp(a.mac, a.mac, a.v4, neighbour.v4),
      'arp',
    );
    const lines2 = await attempt(
      TABLE.ARP_SPOOF_GUARD,
      arp(FORGED_MAC, a.mac, a.v4, neighbour.v4),
      arp(a.mac, a.mac, a.v4, neighbour.v4),
      'arp',
    );
    // tcpdump does not print the ARP sender MAC, so count: only the one genuine request may arrive.
    const requests = (l: string[]) => l.filter((x) => x.includes(`who-has ${neighbour.v4} tell ${a.v4}`));
    for (const l of [lines, lines2]) {
      assert.equal(requests(l).length, 1, `exactly the genuine request arrives:\n${l.join('\n')}`);
      assert.ok(requests(l)[0]?.includes(`${a.mac} > ${BCAST}`), l.join('\n'));
      assert.ok(!l.some((x) => x.includes(FORGED_MAC)), `forged MAC seen:\n${l.join('\n')}`);
    }
  });

  test('IPv4 with a forged source is dropped', async () => {
    const a = attacker;
    const eth = `Ether(src='${a.mac}', dst='${neighbour.mac}')`;
    const lines = await attempt(
      TABLE.IP_SPOOF_GUARD,
      `${eth}/IP(src='10.244.8.200', dst='${neighbour.v4}')/ICMP(id=4242)`,
      `${eth}/IP(src='${a.v4}', dst='${neighbour.v4}')/ICMP(id=4242)`,
      'icmp',
    );
    assert.ok(
      lines.some((l) => l.includes(`${a.v4} > ${neighbour.v4}: ICMP echo request, id 4242`)),
      lines.join('\n'),
    );
    assert.ok(!lines.some((l) => l.includes('10.244.8.200')), `forged source seen:\n${lines.join('\n')}`);
  });

  test('IPv6 with a forged source is dropped', async () => {
    const a = attacker;
    const eth = `Ether(src='${a.mac}', dst='${neighbour.mac}')`;
    const lines = await attempt(
      TABLE.IP_SPOOF_GUARD,
      `${eth}/IPv6(src='fd00:10:244:8::200', dst='${neighbour.v6}')/ICMPv6EchoRequest(id=4243)`,
      `${eth}/IPv6(src='${a.v6}', dst='${neighbour.v6}')/ICMPv6EchoRequest(id=4243)`,
      'icmp6 and ip6[40] == 128',
    );
    assert.ok(
      lines.some((l) => l.includes(`${a.v6} > ${neighbour.v6}`)),
      lines.join('\n'),
    );
    assert.ok(
      !lines.some((l) => l.includes('fd00:10:244:8::200')),
      `forged source seen:\n${lines.join('\n')}`,
    );
  });

  test("a neighbour advertisement for another pod's address is dropped", async () => {
    const a = attacker;
    const na = (target: string) =>
      `Ether(src='${a.mac}', dst='33:33:00:00:00:01')/IPv6(src='${a.v6}', dst='ff02::1', hlim=255)/ICMPv6ND_NA(tgt='${target}', R=0, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr='${a.mac}')`;
    const lines = await attempt(TABLE.ND_GUARD, na(neighbour.v6), na(a.v6), 'icmp6 and ip6[40] == 136');
    assert.ok(
      lines.some((l) => l.includes(`tgt is ${a.v6}`)),
      lines.join('\n'),
    );
    assert.ok(
      !lines.some((l) => l.includes(`tgt is ${neighbour.v6}`)),
      `forged NA seen:\n${lines.join('\n')}`,
    );
  });

  test('a router advertisement from a pod is dropped (pods are hosts)', async () => {
    const a = attacker;
    const raDrops = async () =>
      (await dumpFlows(node, `table=${TABLE.CLASSIFIER}`)).find((f) => f.match.includes('icmp_type=134'))
        ?.packets ?? 0;
    const before = await raDrops();
    const cap = await capture(neighbour.ns, 'eth0', 'icmp6 and ip6[40] == 134');
    await scapy.send(
      `Ether(src='${a.mac}', dst='33:33:00:00:00:01')/IPv6(src='${eui64LinkLocal(a.mac)}', dst='ff02::1', hlim=255)/ICMPv6ND_RA()/ICMPv6NDOptPrefixInfo(prefix='2001:db8::', prefixlen=64)`,
      3,
    );
    const lines = await cap.stop();
    assert.deepEqual(lines, [], 'the neighbour sees no router advertisement');
    assert.ok((await counterReaches(raDrops, before + 3)) >= before + 3, 'the RA drop flow counts them');
  });

  test("the gateway never emits ARP for another of the node's addresses (failure 2)", async () => {
    // The node's "uplink" with its own address (no dummy module here: a veth pair inside the node).
    await must('ip', [
      '-n',
      node.nodeNs,
      'link',
      'add',
      'pwt-uplink',
      'type',
      'veth',
      'peer',
      'name',
      'pwt-uplink-p',
    ]);
    await must('ip', ['-n', node.nodeNs, 'addr', 'add', `${NODE_OTHER_IP}/24`, 'dev', 'pwt-uplink']);
    const arping = (sender: string) =>
      must('ip', [
        'netns',
        'exec',
        node.nodeNs,
        'timeout',
        '5',
        'arping',
        '-c',
        '3',
        '-W',
        '0.05',
        '-i',
        'podwire-gw0',
        '-S',
        sender,
        neighbour.v4,
      ]).catch(
        () => '', // arping exits non-zero when nothing answers; the capture and the counter are what count
      );
    const before = await dropped(node, TABLE.ARP_SPOOF_GUARD);
    const cap = await capture(neighbour.ns, 'eth0', 'arp');
    await arping(NODE_OTHER_IP);
    await arping(GW4);
    const lines = await cap.stop();
    const after = await counterReaches(() => dropped(node, TABLE.ARP_SPOOF_GUARD), before + 3);
    assert.ok(after >= before + 3, `ARP guard dropped ${after - before}, want >= 3`);
    assert.ok(
      lines.some((l) => l.includes(`who-has ${neighbour.v4} tell ${GW4}`)),
      lines.join('\n'),
    );
    assert.ok(!lines.some((l) => l.includes(NODE_OTHER_IP)), `node address leaked:\n${lines.join('\n')}`);
  });
});
