/**
 * Issue 25, finding 1, across nodes: a pod asks its kernel to leave a checksum for later
 * (test/datapath/checksum-forge.ts) and points it at the low word of its own IPv6 source. The guard
 * of its node approves the frame with the real address; on the VXLAN path the checksum is completed
 * when the encapsulated packet leaves the uplink (the bed's uplinks compute checksums, as NICs do),
 * which writes the forged word inside the tunnel. Judged by the victim on the other node: its socket
 * hears only the sender's own address, and the genuine datagram sent after the forged ones.
 *
 * Depends on the checksum hop (src/datapath/checksum-ifb.ts, decision 32): the pod keeps transmit
 * checksumming, and the node's IFB, which the host veth's ingress is redirected to, writes the word
 * before the guard, which drops the frame. (On OVS's userspace datapath, transmit checksumming off in
 * the pod does it: the pod's kernel writes the word.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestCluster } from '../../bed/cluster.js';
import { ipJson, must } from '../../bed/exec.js';
import { resultIps } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { pingFrom } from '../../bed/traffic.js';
import { udpListener } from '../../bed/udp-listener.js';
import { sendChecksumForgery } from '../datapath/checksum-forge.js';
import { podMacOf } from '../datapath/ovs/ovs-node.js';
import { scapyAvailable } from '../datapath/ovs/scapy-sender.js';
import { PYTHON } from '../datapath/ovs/traffic.js';

const PORT = 5603;
const DATAPATHS = ovsAvailable() ? (['linux-bridge', 'ovs'] as const) : (['linux-bridge'] as const);

interface Pod {
  ns: string;
  v6: string;
  mac: string;
}

for (const datapath of DATAPATHS) {
  describe(`checksum-offload forgery over VXLAN: ${datapath}`, {
    skip: !scapyAvailable() && 'python3-scapy is not installed',
  }, () => {
    const cluster = new TestCluster({ nodes: 2, store: 'file', trafficMode: 'encap', datapath, ipv6: true });
    const pods: Record<string, Pod> = {};

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
        pods[id] = { ns, v6: resultIps(add)[1] as string, mac: podMacOf(add).toLowerCase() };
      }
    });
    after(() => cluster.cleanup());

    test("the victim on the other node hears no address that is not the sender's", async () => {
      const [a] = cluster.members;
      const { a1, a2, b1 } = pods as Record<'a1' | 'a2' | 'b1', Pod>;
      if (!a || !a1 || !a2 || !b1) throw new Error('bed');
      const gw = datapath === 'ovs' ? 'podwire-gw0' : 'podwire0';
      const [g] = await ipJson<Array<{ address: string }>>(a.underlay.ns, ['link', 'show', gw]);
      const gwMac = g?.address.toLowerCase() ?? '';
      const low = (ip: string, word: string) => ip.replace(/:[0-9a-f]*$/, `:${word}`);
      // The overlay's IPv6 path is up once a ping crosses it.
      assert.ok(await pingFrom(a1.ns, b1.v6, 10), 'a1 reaches b1 over IPv6');
      const victim = await udpListener(b1.ns, 6, PORT, 6);
      // Node A's gateway, the other pod of A, and an address nobody has.
      await sendChecksumForgery(a1.ns, {
        kind: 'udp6',
        iface: 'eth0',
        mac: a1.mac,
        dstMac: gwMac,
        real: a1.v6,
        forged: [low(a1.v6, '1'), a2.v6, low(a1.v6, 'beef')],
        dst: b1.v6,
        port: PORT,
        payload: 'forged',
      });
      await sleep(300);
      await must('ip', [
        'netns',
        'exec',
        a1.ns,
        PYTHON,
        '-c',
        `import socket,sys
s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for _ in range(3): s.sendto(b'genuine', (sys.argv[1], ${PORT}))`,
        b1.v6,
      ]);
      const heard = await victim.heard;
      assert.ok(
        heard.some((h) => h.payload === 'genuine'),
        `the genuine datagrams arrived: ${JSON.stringify(heard)}`,
      );
      assert.deepEqual([...new Set(heard.map((h) => h.from))], [a1.v6], 'the sources the victim heard');
    });
  });
}
