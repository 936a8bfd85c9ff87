/**
 * Only peers may use a node's VXLAN socket (decision 28): a pod that sends a VXLAN datagram of its own
 * making, with a forged inner source, to its node or to a peer node gets nothing delivered. The pod
 * needs no privilege for this, an ordinary UDP socket will do. Each forged datagram is followed by
 * genuine cross-node traffic that must arrive, so the tunnel works and the listeners were there.
 *
 * Depends on `src/datapath/overlay/vxlan-guard.ts` (vxlanGuardScript): the input rule `udp dport 4789
 * ip saddr != @peers4 ... drop` for the datagram to the pod's own node, the forward rule `udp dport
 * 4789 ip daddr @peers4 ... drop` for the one to the peer (without it, the node's egress masquerade
 * sends it on from the node's own address, which the peer accepts); and on the peer set being filled
 * from the membership's peers (`VxlanGuard.setPeers`, called from cluster-start.ts): with an empty set
 * the genuine traffic fails. The datagram to another address of the peer (a second address, a VIP)
 * leaves node A masqueraded, from A's registered address: only node B's input rule `udp dport 4789 ip
 * daddr != <B's underlay IP> ... drop` stops it (the one to B's pods' gateway comes through the tunnel
 * from a1's own address, which the source rule stops).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestCluster } from '../../bed/cluster.js';
import { ipJson, must } from '../../bed/exec.js';
import { metricSample, scrapeMetrics } from '../../bed/metrics.js';
import { resultIps } from '../../bed/node.js';
import { udpListener } from '../../bed/udp-listener.js';
import { UNDERLAY_PREFIX } from '../../bed/underlay.js';
import { vtepMacFor } from '../../src/datapath/overlay/vxlan-overlay.js';
import { PYTHON } from '../datapath/ovs/traffic.js';

const PORT = 5557;
const METRICS_PORT = 9419;

/** A VXLAN datagram (VNI 1) to each of argv[4:] port 4789 from a plain UDP socket; inside, UDP to PORT from argv[2] to argv[3], for the VTEP MAC argv[1]. */
const FORGE = `
import socket, sys
from scapy.all import Ether, IP, UDP, Raw
vtep, src, dst = sys.argv[1:4]
inner = bytes(Ether(src='02:11:22:33:44:55', dst=vtep)/IP(src=src, dst=dst)/UDP(sport=1111, dport=${PORT})/Raw(b'forged'))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for to in sys.argv[4:]:
    for _ in range(3):
        s.sendto(b'\\x08\\x00\\x00\\x00\\x00\\x00\\x01\\x00' + inner, (to, 4789))
`;

const SEND = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    s.sendto(b'genuine', (sys.argv[1], ${PORT}))
`;

for (const datapath of ['linux-bridge', 'ovs'] as const) {
  describe(`VXLAN guard: ${datapath}`, () => {
    const cluster = new TestCluster({
      nodes: 2,
      store: 'file',
      trafficMode: 'encap',
      datapath,
      agentConfig: { metricsAddress: `127.0.0.1:${METRICS_PORT}` },
    });
    const pods: Record<string, { ns: string; ip: string }> = {};

    before(async () => {
      await cluster.setup();
      for (const [m, id] of [
        [0, 'a1'],
        [0, 'a2'],
        [1, 'b1'],
      ] as const) {
        const member = cluster.members[m];
        if (!member) throw new Error('nodes');
        const ns = await member.node.addPod(id);
        const add = await member.node.cni({ command: 'ADD', containerId: id, netns: ns });
        assert.equal(add.code, 0, add.stdout);
        pods[id] = { ns, ip: resultIps(add)[0] as string };
      }
    });
    after(() => cluster.cleanup());

    /** Listens in `pod` while `act` runs; each datagram it heard as "SOURCE PAYLOAD". */
    async function heard(pod: { ns: string }, act: () => Promise<void>): Promise<string[]> {
      const listener = await udpListener(pod.ns, 4, PORT, 30, 'genuine');
      await act();
      return (await listener.heard).map((h) => `${h.from} ${h.payload}`);
    }

    const py = (pod: { ns: string }, code: string, ...args: string[]) =>
      must('ip', ['netns', 'exec', pod.ns, PYTHON, '-c', code, ...args]);

    test("a pod's own VXLAN datagram, to its node or to a peer, delivers nothing; genuine tunnel traffic does", async () => {
      const [a, b] = cluster.members;
      const { a1, a2, b1 } = pods as Record<'a1' | 'a2' | 'b1', { ns: string; ip: string }>;
      if (!a || !b || !a1 || !a2 || !b1) throw new Error('bed');
      const forgedBefore = await forged(a.node.nodeNs);
      // To its own node: the inner packet would reach the other pod of the node "from" b1.
      const atA = await heard(a2, async () => {
        await py(a1, FORGE, vtepMacFor(a.name), b1.ip, a2.ip, a.underlay.ip);
        await py(a1, FORGE, vtepMacFor(a.name), '10.250.200.9', a2.ip, a.underlay.ip);
        await py(a1, FORGE, vtepMacFor(a.name), '172.30.0.254', a2.ip, a.underlay.ip);
        await sleep(300);
        await py(b1, SEND, a2.ip);
      });
      assert.deepEqual([...new Set(atA)], [`${b1.ip} genuine`], 'a2 heard only the genuine b1');
      // To the peer: the inner packet would reach b1 "from" the underlay's gateway.
      const atB = await heard(b1, async () => {
        await py(a1, FORGE, vtepMacFor(b.name), '172.30.0.254', b1.ip, b.underlay.ip);
        await sleep(300);
        await py(a2, SEND, b1.ip);
      });
      assert.deepEqual([...new Set(atB)], [`${a2.ip} genuine`], 'b1 heard only the genuine a2');
      assert.ok((await forged(a.node.nodeNs)) >= forgedBefore + 12, 'node A counted the forged datagrams');
    });

    test("a pod's VXLAN datagram to another address of the peer (a second address, a VIP, its pods' gateway) delivers nothing", async () => {
      const [a, b] = cluster.members;
      const { a1, a2, b1 } = pods as Record<'a1' | 'a2' | 'b1', { ns: string; ip: string }>;
      if (!a || !b || !a1 || !a2 || !b1) throw new Error('bed');
      // The peer's second address on its uplink (a second NIC, a cloud secondary IP) and a VIP on its
      // loopback that node A routes to it: A's egress masquerade gives the datagram A's registered
      // address as source, so only B can tell it is no tunnel traffic of A's (it is not to B's own).
      const second = `${UNDERLAY_PREFIX}.111`;
      const vip = '172.31.255.1';
      await must('ip', ['-n', b.node.nodeNs, 'addr', 'add', `${second}/24`, 'dev', 'eth0']);
      await must('ip', ['-n', b.node.nodeNs, 'addr', 'add', `${vip}/32`, 'dev', 'lo']);
      await must('ip', ['-n', a.node.nodeNs, 'route', 'add', `${vip}/32`, 'via', b.underlay.ip]);
      // The gateway of b1's pod CIDR, on node B: reached through the tunnel itself, from a1's address.
      const [route] = await ipJson<Array<{ gateway?: string }>>(b1.ns, ['-4', 'route', 'show', 'default']);
      const gateway = route?.gateway;
      assert.ok(gateway, "b1's default gateway");
      const forgedBefore = await forged(b.node.nodeNs);
      const atB = await heard(b1, async () => {
        await py(a1, FORGE, vtepMacFor(b.name), '172.30.0.254', b1.ip, second, vip, gateway);
        await py(a1, FORGE, vtepMacFor(b.name), a2.ip, b1.ip, second, vip, gateway);
        await sleep(300);
        await py(a2, SEND, b1.ip);
      });
      assert.deepEqual([...new Set(atB)], [`${a2.ip} genuine`], 'b1 heard only the genuine a2');
      assert.ok((await forged(b.node.nodeNs)) >= forgedBefore + 18, 'node B counted the forged datagrams');
    });
  });
}

/** The packets the VXLAN guard of the node in `ns` dropped, as its /metrics says. */
async function forged(ns: string): Promise<number> {
  const text = await scrapeMetrics(ns, METRICS_PORT);
  return metricSample(text, 'podwire_node_guard_dropped_packets_total{guard="vxlan_forged"}') ?? Number.NaN;
}
