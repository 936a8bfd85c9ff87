/** The OVS guards' drops reach the Prometheus endpoint, by guard. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ipJson } from '../../../bed/exec.js';
import { metricSample, scrapeMetrics } from '../../../bed/metrics.js';
import { netnsPath } from '../../../bed/namespaces.js';
import { resultIps, TestNode } from '../../../bed/node.js';
import { ARPOP_REQUEST, encodeArpFrame } from '../../../src/arp/arp-frame.js';
import { inNetns, NetnsHandle } from '../../../src/kernel/netns.js';
import { PacketSocket } from '../../../src/kernel/packet-socket.js';

const PORT = 19106;
const node = new TestNode({
  datapath: 'ovs',
  podCIDRs: ['10.244.23.0/24'],
  config: { metricsAddress: `127.0.0.1:${PORT}` },
});
before(() => node.setup());
after(() => node.cleanup());

async function arpGuardDrops(): Promise<number> {
  const text = await scrapeMetrics(node.nodeNs, PORT);
  return metricSample(text, 'podwire_datapath_dropped_packets_total{guard="ARP_SPOOF_GUARD"}') ?? Number.NaN;
}

test('a pod that claims another IP in ARP is dropped, and the drop is counted by guard', async () => {
  const pod = await node.addPod('spoofer');
  const add = await node.cni({ command: 'ADD', containerId: 'spoofer', netns: pod });
  assert.equal(add.code, 0, add.stdout);
  const before = await arpGuardDrops();
  assert.ok(Number.isFinite(before), 'the series exists');

  const [eth0] = await ipJson<Array<{ ifindex: number; address: string }>>(pod, ['link', 'show', 'eth0']);
  assert.ok(eth0);
  using home = NetnsHandle.current();
  using podNs = NetnsHandle.open(netnsPath(pod));
  const forged = encodeArpFrame({
    dst: 'ff:ff:ff:ff:ff:ff',
    src: eth0.address,
    arp: {
      op: ARPOP_REQUEST,
      sha: eth0.address,
      spa: '10.244.23.1',
      tha: '00:00:00:00:00:00',
      tpa: resultIps(add)[0] as string,
    },
  });
  for (let i = 0; i < 3; i++) {
    using sock = inNetns(podNs, home, () => PacketSocket.open(eth0.ifindex));
    sock.send(forged);
  }
  // The userspace datapath updates flow statistics about twice a second.
  const deadline = Date.now() + 5000;
  while ((await arpGuardDrops()) < before + 3) {
    assert.ok(Date.now() < deadline, `drops counted: ${await arpGuardDrops()} (before ${before})`);
    await sleep(200);
  }
});
