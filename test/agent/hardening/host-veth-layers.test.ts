/**
 * The two layers that keep a pod's packets out of the node's stack on its host veth, each proven with
 * the other one switched off (issue 30): the host veth's sysctls (src/agent/cni/host-veth-sysctls.ts:
 * rp_filter=1, arp_ignore=8, IPv6 off) and the nftables input rule (src/agent/startup/
 * host-veth-input.ts). With both in place, each hides the other's removal from every other suite.
 *
 * The way in: the Linux bridge passes a frame for a link-local group MAC (01:80:c2:00:00:0e) up on the
 * port it came in on, before the pod guards; OVS's userspace datapath leaves the kernel every frame of
 * the veth, broadcasts included. The attacker pod sends those frames with scapy; what the node's own
 * sockets hear, and what the pod gets back, judge.
 *
 * The layers are switched off at run time from the test, not in the product: the nftables table
 * deleted in the node's namespace, or the host veth's sysctls written back to the kernel's defaults.
 * The node's namespace-wide rp_filter keys are set to 0 first, so that the result does not depend on
 * what the machine's own defaults hand a new namespace.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { must, run } from '../../../bed/exec.js';
import { resultIps, TestNode } from '../../../bed/node.js';
import { OVS_DATAPATH, ovsAvailable } from '../../../bed/ovs.js';
import { udpListener } from '../../../bed/udp-listener.js';
import { hostVethName } from '../../../src/agent/cni/host-veth.js';
import { HOST_VETH_INPUT_TABLE } from '../../../src/agent/startup/host-veth-input.js';
import { ScapySender, scapyAvailable } from '../../datapath/ovs/scapy-sender.js';

const GW4 = '10.244.76.1';
const GW6 = 'fd00:10:244:76::1';
/** Addresses of the pod CIDRs that are not the attacker's (another pod's, for the node). */
const OTHER4 = '10.244.76.200';
const OTHER6 = 'fd00:10:244:76::200';
const PORT = 9999;
const datapaths: Array<'linux-bridge' | 'ovs'> = ovsAvailable() ? ['linux-bridge', 'ovs'] : ['linux-bridge'];

for (const datapath of datapaths) {
  describe(`host veth, layer by layer (${datapath})`, {
    skip: !scapyAvailable() && 'python3-scapy is not installed',
  }, () => {
    const node = new TestNode({ datapath, podCIDRs: ['10.244.76.0/24', 'fd00:10:244:76::/64'] });
    let scapy: ScapySender | undefined;
    let podNs = '';
    let mac = '';
    let own4 = '';
    let own6 = '';
    const veth = hostVethName('layers', 'eth0');
    /** Where the kernel hands a pod's frame to the host veth's own stack, per datapath. */
    const dsts =
      datapath === 'linux-bridge' ? ['01:80:c2:00:00:0e'] : ['01:80:c2:00:00:0e', 'ff:ff:ff:ff:ff:ff'];

    const sysctl = async (key: string) =>
      (await must('ip', ['netns', 'exec', node.nodeNs, 'sysctl', '-n', key])).trim();
    const setSysctl = (key: string, value: string) =>
      must('ip', ['netns', 'exec', node.nodeNs, 'sysctl', '-qw', `${key}=${value}`]);

    /** Forged datagrams (another pod's source) to the gateway address, then a genuine one: what the node heard. */
    async function forgedThenGenuine(family: 4 | 6): Promise<string[]> {
      const listener = await udpListener(node.nodeNs, family, PORT, 20, 'genuine');
      for (const dst of dsts) {
        const ip = family === 4 ? `IP(src='${OTHER4}', dst='${GW4}')` : `IPv6(src='${OTHER6}', dst='${GW6}')`;
        await (scapy as ScapySender).send(
          `Ether(src='${mac}', dst='${dst}')/${ip}/UDP(sport=1234, dport=${PORT})/Raw(b'forged')`,
          3,
        );
      }
      const genuine = await run('ip', [
        ...['netns', 'exec', podNs, '/usr/bin/python3', '-c'],
        `import socket; s = socket.socket(socket.AF_INET${family === 6 ? '6' : ''}, socket.SOCK_DGRAM); s.sendto(b'genuine', ('${family === 4 ? GW4 : GW6}', ${PORT}))`,
      ]);
      assert.equal(genuine.code, 0, genuine.stderr);
      return (await listener.heard).map((h) => `${h.from} ${h.payload}`);
    }

    before(async () => {
      // What a machine hands a new namespace must not decide the result (issue 30).
      await node.setup();
      for (const key of ['net.ipv4.conf.all.rp_filter', 'net.ipv4.conf.default.rp_filter'])
        await setSysctl(key, '0');
      podNs = await node.addPod('layers');
      const add = await node.cni({ command: 'ADD', containerId: 'layers', netns: podNs });
      assert.equal(add.code, 0, add.stdout);
      [own4, own6] = resultIps(add) as [string, string];
      const [link] = JSON.parse(
        (await must('ip', ['-n', podNs, '-j', 'link', 'show', 'eth0'])) || '[]',
      ) as Array<{
        address: string;
      }>;
      mac = link?.address as string;
      scapy = await ScapySender.start(podNs);
    });

    after(async () => {
      await scapy?.close();
      await node.cleanup();
    });

    test('the host veth sysctls are read back as set', async () => {
      assert.equal(await sysctl(`net.ipv4.conf.${veth}.rp_filter`), '1');
      assert.equal(await sysctl(`net.ipv4.conf.${veth}.arp_ignore`), '8');
      assert.equal(await sysctl(`net.ipv6.conf.${veth}.disable_ipv6`), '1');
      assert.equal(await sysctl(`net.ipv6.conf.${veth}.accept_ra`), '0');
    });

    // ARP meets no inet-family hook: arp_ignore=8 is the only layer. A probe (sender 0.0.0.0) for the
    // gateway's address, handed to the host veth's stack, is answered from the host veth's MAC without it.
    test('arp_ignore=8 alone: an ARP probe handed to the host veth gets no answer from it', async () => {
      const hostMac = (
        JSON.parse(await must('ip', ['-n', node.nodeNs, '-j', 'link', 'show', veth])) as Array<{
          address: string;
        }>
      )[0]?.address;
      const script = `
import sys, time
from scapy.all import AsyncSniffer, Ether, ARP, sendp, conf
conf.verb = 0
sniffer = AsyncSniffer(iface='eth0', lfilter=lambda p: ARP in p and p[ARP].op == 2 and p[Ether].src == '${hostMac}')
sniffer.start(); time.sleep(0.5)
for dst in ${JSON.stringify(dsts)}:
    sendp(Ether(src='${mac}', dst=dst)/ARP(op=1, hwsrc='${mac}', psrc='0.0.0.0', pdst='${GW4}'), iface='eth0', count=3)
time.sleep(1.5)
print(len(sniffer.stop()))
`;
      const r = await run('ip', ['netns', 'exec', podNs, '/usr/bin/python3', '-c', script]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim(), '0', `ARP answers from the host veth (${hostMac})`);
    });

    test('the sysctls alone (nftables rule deleted): forged IPv4 and IPv6 never reach the node', async () => {
      await must('ip', [
        'netns',
        'exec',
        node.nodeNs,
        'nft',
        'delete',
        'table',
        'inet',
        HOST_VETH_INPUT_TABLE,
      ]);
      try {
        assert.deepEqual(await forgedThenGenuine(4), [`${own4} genuine`], 'rp_filter=1 on the host veth');
        assert.deepEqual(await forgedThenGenuine(6), [`${own6} genuine`], 'IPv6 off on the host veth');
      } finally {
        // A restart puts the table back (installed at every start).
        await node.stopAgent();
        await node.startAgent();
      }
      const tables = await must('ip', ['netns', 'exec', node.nodeNs, 'nft', 'list', 'tables']);
      assert.match(tables, new RegExp(`table inet ${HOST_VETH_INPUT_TABLE}`));
    });

    test('the nftables rule alone (host veth sysctls at the defaults): forged IPv4 and IPv6 never reach the node', async () => {
      await setSysctl(`net.ipv4.conf.${veth}.rp_filter`, '0');
      await setSysctl(`net.ipv6.conf.${veth}.disable_ipv6`, '0');
      try {
        await sleep(datapath === 'ovs' && OVS_DATAPATH === 'netdev' ? 500 : 200); // the link-local address
        assert.deepEqual(await forgedThenGenuine(4), [`${own4} genuine`], 'the input rule, IPv4');
        assert.deepEqual(await forgedThenGenuine(6), [`${own6} genuine`], 'the input rule, IPv6');
      } finally {
        await setSysctl(`net.ipv4.conf.${veth}.rp_filter`, '1');
        await setSysctl(`net.ipv6.conf.${veth}.disable_ipv6`, '1');
      }
    });
  });
}
