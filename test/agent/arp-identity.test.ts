/**
 * failure 2 (docs/architecture.md) on a real kernel: the node answers a pod from an address that is not the
 * gateway's (its uplink's). With podwire's gateway setting (arp_announce=1) the ARP request that leaves
 * the gateway carries the gateway's own IP; with the kernel default (0) it carries the uplink's IP with
 * the gateway's MAC. The gateway's ARP guard drops that frame before it reaches any port; with the
 * guard removed too, the ARP audit flags exactly that frame. The second half proves the audit (and so
 * the first half) can fail.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ipJson, must, run } from '../../bed/exec.js';
import { netnsPath } from '../../bed/namespaces.js';
import { resultIps, TestNode } from '../../bed/node.js';
import { auditArp, type Identity } from '../../src/arp/audit.js';
import { captureArp } from '../../src/arp/capture.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { CaptureSocket } from '../../src/kernel/packet-socket.js';

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

/**
 * The node pings the pod from its uplink address after forgetting the pod's MAC; returns the ARP seen
 * leaving the bridge. `reaches`: whether the ping must succeed.
 */
async function nodeAsksForPod(reaches = true): Promise<Buffer[]> {
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
  assert.equal(
    ping.code === 0,
    reaches,
    reaches ? 'the node reaches the pod' : 'the node cannot resolve the pod',
  );
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

const GUARD = 'podwire_gateway_arp';

/** The packets the gateway's ARP guard (an nftables chain in the node namespace) has dropped. */
async function guardDrops(): Promise<number> {
  const out = await must('ip', ['netns', 'exec', node.nodeNs, 'nft', 'list', 'table', 'netdev', GUARD]);
  return [...out.matchAll(/counter packets (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

test('with the kernel default (arp_announce=0) the guard drops the leak; without the guard the audit catches it', async () => {
  const key = `/proc/sys/net/ipv4/conf/podwire0/arp_announce`;
  await must('ip', ['netns', 'exec', node.nodeNs, 'sh', '-c', `echo 0 > ${key}`]);
  const saved = await must('ip', ['netns', 'exec', node.nodeNs, 'nft', 'list', 'table', 'netdev', GUARD]);
  try {
    // The kernel now forms failure 2's request (the uplink's IP with the gateway's MAC); the guard
    // drops every copy before it reaches a port, so the node cannot resolve the pod from that address.
    const before = await guardDrops();
    const guarded = auditArp(await nodeAsksForPod(false), identities);
    assert.deepEqual(
      guarded.rows.filter((r) => r.senderIp === UPLINK_IP),
      [],
      'no frame with the uplink IP left the bridge',
    );
    assert.ok((await guardDrops()) > before, 'the guard counted the drops');

    // Without the guard (so only arp_announce stood between the node and the leak), the audit sees it.
    await must('ip', ['netns', 'exec', node.nodeNs, 'nft', 'delete', 'table', 'netdev', GUARD]);
    const report = auditArp(await nodeAsksForPod(), identities);
    assert.equal(report.violations.length, 1, JSON.stringify(report.rows));
    assert.equal(report.violations[0]?.senderIp, UPLINK_IP);
    assert.equal(report.violations[0]?.verdict, 'WRONG-MAC');
  } finally {
    await must('ip', ['netns', 'exec', node.nodeNs, 'sh', '-c', `echo 1 > ${key}`]);
    await run('ip', ['netns', 'exec', node.nodeNs, 'nft', 'delete', 'table', 'netdev', GUARD]);
    const restored = await run('ip', ['netns', 'exec', node.nodeNs, 'nft', '-f', '-'], { input: saved });
    assert.equal(restored.code, 0, restored.stderr);
  }
});
