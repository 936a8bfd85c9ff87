/**
 * The spoofing suite's egress test (spoofing.ts runs it inside its suite, on its pods): what a pod
 * sends towards a host outside the cluster leaves the node with the node's address, also when the
 * node's conntrack finds the packet invalid. The victim is that host: a namespace behind a veth of the
 * node, with no route to the pod CIDRs, and a capture on its interface.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { must } from '../../bed/exec.js';
import { capture } from '../../bed/tcpdump.js';
import { ping, type SpoofingBed } from './spoofing-bed.js';

/** The underlay host and the node's end of its link (test-only documentation prefixes). */
const NODE4 = '192.0.2.1';
const HOST4 = '192.0.2.2';
const NODE6 = '2001:db8:34::1';
const HOST6 = '2001:db8:34::2';

/** The capture's lines whose IP source is `ip` (tcpdump -n -e: "...: SRC[.PORT] > DST..."). */
function from(lines: string[], ip: string): string[] {
  const escaped = ip.replaceAll('.', '\\.');
  return lines.filter((l) => new RegExp(`: ${escaped}(\\.\\d+)? > `).test(l));
}

export function invalidEgressTests(bed: SpoofingBed): void {
  // Depends on src/datapath/egress-masquerade.ts, chain `forward`: `meta pkttype host ct state invalid ip saddr
  // @pods_ipv4 ip daddr != @keep_ipv4 counter drop` and its ip6 twin (decision 34). NAT acts on
  // connections only: a packet conntrack finds invalid gets no masquerade.
  test("a pod's packets that conntrack finds invalid (SYN+FIN, a stray ICMP error) never leave with the pod's address", async () => {
    const { node, gwMac, attacker: a, scapy } = bed;
    const host = await node.ns.add('uhost');
    await must('ip', [
      '-n',
      node.nodeNs,
      'link',
      'add',
      'uh0',
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      host,
    ]);
    await must('ip', ['-n', node.nodeNs, 'addr', 'add', `${NODE4}/24`, 'dev', 'uh0']);
    await must('ip', ['-n', node.nodeNs, 'addr', 'add', `${NODE6}/64`, 'dev', 'uh0', 'nodad']);
    await must('ip', ['-n', host, 'addr', 'add', `${HOST4}/24`, 'dev', 'eth0']);
    await must('ip', ['-n', host, 'addr', 'add', `${HOST6}/64`, 'dev', 'eth0', 'nodad']);
    for (const [ns, dev] of [
      [node.nodeNs, 'uh0'],
      [host, 'eth0'],
      [host, 'lo'],
    ] as const) {
      await must('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    }
    // The node's neighbour entries for the host, resolved before anything is judged.
    await ping(node.nodeNs, HOST4);
    await ping(node.nodeNs, HOST6);
    const to = `Ether(src='${a.mac}', dst='${gwMac}')`;
    const v4 = `${to}/IP(src='${a.v4}', dst='${HOST4}')`;
    const v6 = `${to}/IPv6(src='${a.v6}', dst='${HOST6}')`;
    const cap = await capture(host, 'eth0', 'ip or ip6');
    let lines: string[] = [];
    try {
      await scapy.send(`${v4}/TCP(sport=40001, dport=80, flags='SF')`, 2);
      await scapy.send(`${v6}/TCP(sport=40001, dport=80, flags='SF')`, 2);
      // Port unreachable for a datagram the host never sent.
      await scapy.send(
        `${v4}/ICMP(type=3, code=3)/IP(src='${HOST4}', dst='${a.v4}')/UDP(sport=53, dport=40002)`,
        2,
      );
      await scapy.send(
        `${v6}/ICMPv6DestUnreach(code=4)/IPv6(src='${HOST6}', dst='${a.v6}')/UDP(sport=53, dport=40002)`,
        2,
      );
      // Genuine: a SYN opens a connection and leaves masqueraded, after the invalid ones.
      await scapy.send(`${v4}/TCP(sport=40003, dport=80, flags='S')`, 1);
      await scapy.send(`${v6}/TCP(sport=40003, dport=80, flags='S')`, 1);
    } finally {
      lines = await cap.stop();
    }
    const all = lines.join('\n');
    assert.ok(
      from(lines, NODE4).some((l) => l.includes('Flags [S]')),
      `the genuine SYN, masqueraded:\n${all}`,
    );
    assert.ok(
      from(lines, NODE6).some((l) => l.includes('Flags [S]')),
      `the genuine IPv6 SYN, masqueraded:\n${all}`,
    );
    assert.deepEqual(from(lines, a.v4), [], "what the host received from the pod's IPv4 address");
    assert.deepEqual(from(lines, a.v6), [], "what the host received from the pod's IPv6 address");
  });
}
