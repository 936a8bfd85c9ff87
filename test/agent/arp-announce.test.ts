/**
 * I5 by behaviour on the Linux bridge: `arp_announce=1` on the gateway, seen in what a pod receives.
 * The node sends to a pod from an address that is not in the pod's subnet (its own address on
 * another interface, as the node IP is on the uplink): the node must resolve the pod with the
 * gateway's own address as the ARP sender, never that other address. With `arp_announce=0` the
 * kernel takes the packet's source as the sender: the request is then either dropped by the gateway
 * ARP guard (no answer: the ping fails) or, with the guard gone too, reaches the pod carrying the
 * node's other address (failure 2). Either way this test fails; the sysctl read-back in
 * announce.test.ts would not tell the two apart from a working gateway.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { must, run } from '../../bed/exec.js';
import { resultIps, TestNode } from '../../bed/node.js';
import { capture } from '../../bed/tcpdump.js';

/** TEST-NET-1 (RFC 5737) on the node namespace's loopback: an address outside every pod subnet. */
const NODE_OTHER_IP = '192.0.2.10';
const GATEWAY = '10.244.23.1';
const node = new TestNode({ podCIDRs: ['10.244.23.0/24'] });

before(async () => {
  await node.setup();
  await must('ip', ['-n', node.nodeNs, 'addr', 'add', `${NODE_OTHER_IP}/32`, 'dev', 'lo']);
});
after(() => node.cleanup());

test('the node resolves a pod with the gateway address as sender, never its other address', async () => {
  const pod = await node.addPod('announce');
  const add = await node.cni({ command: 'ADD', containerId: 'arp-announce', netns: pod });
  assert.equal(add.code, 0, add.stdout);
  const podIp = resultIps(add)[0] as string;
  try {
    // What the pod receives: every ARP on its interface.
    const cap = await capture(pod, 'eth0', 'arp');
    let answered = 0;
    for (let i = 0; i < 3; i++) {
      // The node forgets the pod, then sends to it from its other address: it must ask again.
      await run('ip', ['-n', node.nodeNs, 'neigh', 'flush', 'dev', 'podwire0']);
      const ping = await run('ip', [
        'netns',
        'exec',
        node.nodeNs,
        'ping',
        '-n',
        '-c',
        '1',
        '-w',
        '3',
        '-I',
        NODE_OTHER_IP,
        podIp,
      ]);
      if (ping.code === 0) answered++;
    }
    const lines = await cap.stop();
    // The pod's own gratuitous ARPs (who-has POD tell POD) are its announcer's, not the node's.
    const requests = lines.filter(
      (l) => l.includes(`Request who-has ${podIp} tell`) && !l.includes(`tell ${podIp},`),
    );
    const senders = new Set(requests.map((l) => /tell (\S+?),/.exec(l)?.[1] ?? l));
    assert.ok(requests.length >= 3, `the node asked for the pod each time:\n${lines.join('\n')}`);
    assert.deepEqual([...senders], [GATEWAY], `ARP senders seen by the pod:\n${lines.join('\n')}`);
    assert.equal(answered, 3, 'every ping from the other address was answered');
  } finally {
    assert.equal((await node.cni({ command: 'DEL', containerId: 'arp-announce', netns: pod })).code, 0);
  }
});
