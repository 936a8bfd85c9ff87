/**
 * DESIGN.md failure 2 on a real kernel: the node answers a pod from an address that is not the
 * gateway's (its uplink's). With podwire's gateway setting (arp_announce=1) the ARP request that leaves
 * the gateway carries the gateway's own IP; with the kernel default (0) it carries the uplink's IP with
 * the gateway's MAC, and the ARP audit flags exactly that frame. The second half proves the audit (and
 * so the first half) can fail.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { auditArp, type Identity } from '../../src/arp/audit.js';
import { captureArp } from '../../src/arp/capture.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { CaptureSocket } from '../../src/kernel/packet-socket.js';
import { ipJson, must, run } from '../testbed/exec.js';
import { netnsPath } from '../testbed/namespaces.js';
import { resultIps, TestNode } from '../testbed/node.js';

const node = new TestNode({ podCIDRs: ['10.244.17.0/24'] });
const UPLINK_IP = '172.31.0.1';
let identities: Identity[] = [];
let podIp = '';
let bridgeIndex = 0;

async function macOf(ns: string, ifname: string): Promise<{ mac: string; index: number }> {
  const [l] = await ipJson<Array<{ address: string; ifindex: number }>>(ns, ['link', 'show', ifname]);
  return { mac: l?.address ?? '', index: l?.ifindex ?? 0 };
}

before(async () => {
  await node.setup();
  // An "uplink" with an address outside the pod CIDR, as the node's own underlay address.
  const far = await node.addPod('far');
  await must('ip', [
    '-n',
    node.nodeNs,
    'link',
    'add',
    'uplink0',
    'type',
    'veth',
    'peer',
    'name',
    'eth0',
    'netns',
    far,
  ]);
  await must('ip', ['-n', node.nodeNs, 'addr', 'add', `${UPLINK_IP}/24`, 'dev', 'uplink0']);
  await must('ip', ['-n', node.nodeNs, 'link', 'set', 'uplink0', 'up']);
  await must('ip', ['-n', far, 'link', 'set', 'eth0', 'up']);
  const pod = await node.addPod('p');
  const add = await node.cni({ command: 'ADD', containerId: 'arp-id', netns: pod });
  assert.equal(add.code, 0, add.stdout);
  podIp = resultIps(add)[0] as string;
  const bridge = await macOf(node.nodeNs, 'podwire0');
  bridgeIndex = bridge.index;
  identities = [
    { ip: '10.244.17.1', mac: bridge.mac, owner: 'gateway podwire0' },
    { ip: UPLINK_IP, mac: (await macOf(node.nodeNs, 'uplink0')).mac, owner: 'node uplink0' },
    { ip: podIp, mac: '0a:58:0a:f4:11:02', owner: 'pod' },
  ];
});
after(() => node.cleanup());

/** The node pings the pod from its uplink address after forgetting the pod's MAC; returns the ARP seen. */
async function nodeAsksForPod(): Promise<Buffer[]> {
  await must('ip', ['-n', node.nodeNs, 'neigh', 'flush', 'dev', 'podwire0']);
  using home = NetnsHandle.current();
  using nodeNs = NetnsHandle.open(netnsPath(node.nodeNs));
  const open = (ifindex: number, ethertype: number) =>
    inNetns(nodeNs, home, () => CaptureSocket.open(ifindex, ethertype));
  const frames = captureArp(bridgeIndex, 800, open);
  const ping = await run('ip', [
    'netns',
    'exec',
    node.nodeNs,
    'ping',
    '-c',
    '1',
    '-W',
    '1',
    '-I',
    UPLINK_IP,
    podIp,
  ]);
  assert.equal(ping.code, 0, 'the node reaches the pod');
  return frames;
}

test("with podwire's gateway (arp_announce=1) the node's IP is never announced with the gateway's MAC", async () => {
  const report = auditArp(await nodeAsksForPod(), identities);
  assert.ok(
    report.rows.some((r) => r.senderIp === '10.244.17.1' && r.verdict === 'ok'),
    JSON.stringify(report.rows),
  );
  assert.deepEqual(report.violations, []);
});

test('with the kernel default (arp_announce=0) the audit catches the leak', async () => {
  const key = `/proc/sys/net/ipv4/conf/podwire0/arp_announce`;
  await must('ip', ['netns', 'exec', node.nodeNs, 'sh', '-c', `echo 0 > ${key}`]);
  try {
    const report = auditArp(await nodeAsksForPod(), identities);
    assert.equal(report.violations.length, 1, JSON.stringify(report.rows));
    assert.equal(report.violations[0]?.senderIp, UPLINK_IP);
    assert.equal(report.violations[0]?.verdict, 'WRONG-MAC');
  } finally {
    await must('ip', ['netns', 'exec', node.nodeNs, 'sh', '-c', `echo 1 > ${key}`]);
  }
});
