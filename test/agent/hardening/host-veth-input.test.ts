/**
 * A pod's packets reach the node's own sockets only through the bridge or the gateway port, never on
 * its host veth (src/agent/startup/host-veth-input.ts). Found in a review: a UDP datagram from 0.0.0.0
 * to 255.255.255.255 (strict rp_filter lets that pair through) reached a socket of the node when the
 * pod sent it to a link-local group MAC on the Linux bridge, which passes such frames up on the port
 * they came in on before any pod guard, or, on OVS's userspace datapath, to the broadcast MAC: the
 * kernel receives every frame of a port OVS reads through a packet socket.
 *
 * Per datapath: a listener on UDP 67 in the node (a DHCP server on the host, say); the pod sends both
 * forged frames with scapy, then one datagram from its own socket to the gateway address. The listener
 * hears only that one. Fails when the rule of `hostVethInputScript` is removed (mutation
 * `host-veth-input-off` in scripts/mutate.mjs): on the Linux bridge the link-local frame is heard, on
 * the userspace datapath both. The drops are counted in /metrics
 * (`podwire_node_guard_dropped_packets_total{guard="host_veth_input"}`).
 *
 * The rule keys on podwire's interface group (`HOST_VETH_GROUP`, set in the request that creates the
 * host veth: src/agent/cni/cmd-add.ts createVeth), not on the name: a veth an administrator named
 * `pw-adm` carries traffic to the node as before (fails with the old `iifname "pw*"` rule); a host veth
 * of an earlier agent (group 0, podwire's alias) is put in the group at the next start
 * (`groupLegacyHostVeths`) and guarded again (mutations `host-veth-input-group-unset`,
 * `host-veth-input-legacy-ungrouped`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must, run } from '../../../bed/exec.js';
import { metricSample, scrapeMetrics } from '../../../bed/metrics.js';
import { NamespaceSet } from '../../../bed/namespaces.js';
import { resultIps, TestNode } from '../../../bed/node.js';
import { OVS_DATAPATH, ovsAvailable } from '../../../bed/ovs.js';
import { udpListener } from '../../../bed/udp-listener.js';
import { ScapySender, scapyAvailable } from '../../datapath/ovs/scapy-sender.js';

const POD_CIDR = '10.244.74.0/24';
const GATEWAY = '10.244.74.1';
const METRICS_PORT = 9418;
const datapaths: Array<'linux-bridge' | 'ovs'> = ovsAvailable() ? ['linux-bridge', 'ovs'] : ['linux-bridge'];

for (const datapath of datapaths) {
  describe(`host veth input (${datapath}): nothing reaches the node on a host veth`, {
    skip: !scapyAvailable() && 'python3-scapy is not installed',
  }, () => {
    let node: TestNode;
    let scapy: ScapySender | undefined;
    const spaces = new NamespaceSet();

    /**
     * The pod `podNs` sends both forged frames (from 0.0.0.0 to a link-local group and the broadcast
     * MAC), then one datagram to the gateway from its socket; what a listener on UDP 67 in the node
     * heard, as "SOURCE PAYLOAD".
     */
    async function heardFrom(podNs: string): Promise<string[]> {
      const [link] = JSON.parse(
        (await run('ip', ['-n', podNs, '-j', 'link', 'show', 'eth0'])).stdout,
      ) as Array<{
        address: string;
      }>;
      const mac = link?.address as string;
      await scapy?.close();
      scapy = await ScapySender.start(podNs);
      const listener = await udpListener(node.nodeNs, 4, 67, 20, 'genuine');
      for (const [dst, payload] of [
        ['01:80:c2:00:00:0e', 'link-local'],
        ['ff:ff:ff:ff:ff:ff', 'broadcast'],
      ]) {
        await scapy.send(
          `Ether(dst='${dst}', src='${mac}')/IP(src='0.0.0.0', dst='255.255.255.255')/UDP(sport=68, dport=67)/Raw(b'${payload}')`,
          3,
        );
      }
      const genuine = await run('ip', [
        ...['netns', 'exec', podNs, '/usr/bin/python3', '-c'],
        `import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'genuine', ('${GATEWAY}', 67))`,
      ]);
      assert.equal(genuine.code, 0, genuine.stderr);
      return (await listener.heard).map((h) => `${h.from} ${h.payload}`);
    }

    before(async () => {
      node = new TestNode({
        datapath,
        podCIDRs: [POD_CIDR],
        config: { metricsAddress: `127.0.0.1:${METRICS_PORT}` },
      });
      await node.setup();
    });

    after(async () => {
      await scapy?.close();
      await node?.cleanup();
      await spaces.cleanup();
    });

    test('a datagram from 0.0.0.0 to a link-local group or broadcast MAC is not heard; one through the gateway is', async () => {
      const podNs = await node.addPod('hv');
      const add = await node.cni({ command: 'ADD', containerId: 'hv', netns: podNs });
      assert.equal(add.code, 0, add.stdout);
      assert.equal(resultIps(add).length, 1);
      assert.deepEqual(
        await heardFrom(podNs),
        [`${resultIps(add)[0]} genuine`],
        'only the datagram sent through the gateway reached the node',
      );
      // Counted, and in /metrics: the 3 link-local frames on the Linux bridge, 3 broadcasts more on
      // OVS's userspace datapath (the Linux bridge's pod guard drops those first: not from the pod's
      // address). OVS's kernel datapath takes every frame away from the stack: nothing to count.
      const want = datapath === 'linux-bridge' ? 3 : OVS_DATAPATH === 'netdev' ? 6 : 0;
      const metrics = await scrapeMetrics(node.nodeNs, METRICS_PORT);
      const dropped = metricSample(
        metrics,
        'podwire_node_guard_dropped_packets_total{guard="host_veth_input"}',
      );
      assert.equal(dropped, want, `host_veth_input drops in /metrics (${datapath}, ${OVS_DATAPATH})`);
      assert.equal((await node.cni({ command: 'DEL', containerId: 'hv', netns: podNs })).code, 0);
    });

    test("a veth of the administrator's named pw-adm is not podwire's: the node hears what arrives on it", async () => {
      const adminNs = await spaces.add('hvadm');
      await must('ip', [
        '-n',
        node.nodeNs,
        'link',
        'add',
        'pw-adm',
        'type',
        'veth',
        'peer',
        'name',
        'eth0',
        'netns',
        adminNs,
      ]);
      await must('ip', ['-n', node.nodeNs, 'addr', 'add', '192.168.99.1/24', 'dev', 'pw-adm']);
      await must('ip', ['-n', node.nodeNs, 'link', 'set', 'pw-adm', 'up']);
      await must('ip', ['-n', adminNs, 'addr', 'add', '192.168.99.2/24', 'dev', 'eth0']);
      await must('ip', ['-n', adminNs, 'link', 'set', 'eth0', 'up']);
      const listener = await udpListener(node.nodeNs, 4, 67, 20, 'admin');
      await must('ip', [
        ...['netns', 'exec', adminNs, '/usr/bin/python3', '-c'],
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'admin', ('192.168.99.1', 67))",
      ]);
      assert.deepEqual(
        (await listener.heard).map((h) => `${h.from} ${h.payload}`),
        ['192.168.99.2 admin'],
        "the administrator's veth is left alone",
      );
      await must('ip', ['-n', node.nodeNs, 'link', 'del', 'pw-adm']);
    });

    test('a host veth of an earlier agent (not in the group, podwire alias) is guarded again after a restart', async () => {
      const podNs = await node.addPod('hv2');
      const add = await node.cni({ command: 'ADD', containerId: 'hv2', netns: podNs });
      assert.equal(add.code, 0, add.stdout);
      const interfaces = (add.json?.interfaces ?? []) as Array<{ name: string; sandbox?: string }>;
      const hostVeth = interfaces.find((i) => !i.sandbox)?.name;
      assert.ok(hostVeth, 'the result names the host veth');
      await node.stopAgent();
      // What an agent before the group left: a host veth in group 0.
      await must('ip', ['-n', node.nodeNs, 'link', 'set', 'dev', hostVeth, 'group', 'default']);
      await node.startAgent();
      assert.deepEqual(await heardFrom(podNs), [`${resultIps(add)[0]} genuine`]);
      assert.equal((await node.cni({ command: 'DEL', containerId: 'hv2', netns: podNs })).code, 0);
    });
  });
}
