/**
 * Gratuitous ARP and unsolicited NA on pod start, seen by a capture on the bridge; and the gateway's
 * ARP hygiene (I5): arp_announce=1, a MAC that does not change when ports come and go.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ipJson, must } from '../../bed/exec.js';
import { resultIps, TestNode } from '../../bed/node.js';
import { capture } from '../../bed/tcpdump.js';

const node = new TestNode({ podCIDRs: ['10.244.3.0/24', 'fd00:10:244:3::/64'] });
before(() => node.setup());
after(() => node.cleanup());

test('three gratuitous ARPs and unsolicited NAs from the pod are seen on the bridge', async () => {
  const pod = await node.addPod('garp');
  const cap = await capture(
    node.nodeNs,
    process.env.PWT_IF ?? 'podwire0',
    'arp or (icmp6 and ip6[40] == 136)',
  );
  const add = await node.cni({ command: 'ADD', containerId: 'garp', netns: pod });
  assert.equal(add.code, 0, add.stdout);
  const lines = await cap.stop();
  const ips = resultIps(add);
  const interfaces = (add.json?.interfaces ?? []) as Array<{ mac: string; sandbox?: string }>;
  const mac = interfaces.find((i) => i.sandbox)?.mac;
  const v4 = ips.find((ip) => !ip.includes(':')) as string;
  const v6 = ips.find((ip) => ip.includes(':')) as string;
  const garps = lines.filter(
    (l) => l.includes(`${mac} > ff:ff:ff:ff:ff:ff`) && l.includes(`Request who-has ${v4} tell ${v4}`),
  );
  assert.equal(garps.length, 3, lines.join('\n'));
  const nas = lines.filter(
    (l) => l.includes(`${mac} > 33:33:00:00:00:01`) && l.includes('neighbor advertisement') && l.includes(v6),
  );
  assert.equal(nas.length, 3, lines.join('\n'));
  assert.equal((await node.cni({ command: 'DEL', containerId: 'garp', netns: pod })).code, 0);
});

test('the gateway has arp_announce=1 and keeps its MAC when ports come and go', async () => {
  const announce = await must('ip', [
    'netns',
    'exec',
    node.nodeNs,
    'cat',
    '/proc/sys/net/ipv4/conf/podwire0/arp_announce',
  ]);
  assert.equal(announce.trim(), '1');
  const macOf = async () =>
    (await ipJson<Array<{ address: string }>>(node.nodeNs, ['link', 'show', 'podwire0']))[0]?.address;
  const before = await macOf();
  const pods = [await node.addPod('m1'), await node.addPod('m2')];
  for (const [i, pod] of pods.entries()) {
    assert.equal((await node.cni({ command: 'ADD', containerId: `mac-${i}`, netns: pod })).code, 0);
  }
  assert.equal(await macOf(), before);
  for (const [i, pod] of pods.entries()) {
    assert.equal((await node.cni({ command: 'DEL', containerId: `mac-${i}`, netns: pod })).code, 0);
  }
  assert.equal(await macOf(), before);
});
