/**
 * ADD, CHECK, DEL on the OVS datapath (type: bed/ovs.ts's OVS_DATAPATH) through the real relay and
 * agent, for IPv4-only, IPv6-only and dual-stack nodes: ICMP and TCP between pods and between a pod and
 * the node; tx-checksumming off on the pod side; on the kernel datapath the pods' frames pass the
 * checksum hop's IFB; CHECK sees a missing flow; DEL removes the pod's flows
 * and port before the veth; the announcements are counted by the pod's own guard flows; the
 * `podwire flows` command shows the pipeline and one pod.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { run } from '../../../bed/exec.js';
import { settledHostVeths } from '../../../bed/inspect.js';
import { netnsPath } from '../../../bed/namespaces.js';
import { ROOT, resultIps, TestNode } from '../../../bed/node.js';
import { OVS_DATAPATH } from '../../../bed/ovs.js';
import { CHECKSUM_IFB } from '../../../src/datapath/checksum-ifb.js';
import { HOP_TABLE, parseHopTable } from '../../../src/datapath/ovs/netdev-ingress-hop.js';
import { EthtoolSocket } from '../../../src/kernel/ethtool.js';
import { inNetns, NetnsHandle } from '../../../src/kernel/netns.js';
import { nftIn } from '../../../src/kernel/nft.js';
import {
  allPodFlows,
  counterReaches,
  dropped,
  hostVethOf,
  ovsOf,
  ovsPorts,
  podFlowsOf,
  TABLE,
} from './ovs-node.js';
import { ping, tcpExchange } from './traffic.js';

const TCP_OK = '200007 100001';

/** The node IFB's transmitted packets, or undefined when there is none. */
async function ifbTxPackets(nodeNs: string): Promise<number | undefined> {
  const r = await run('ip', ['-n', nodeNs, '-s', '-j', 'link', 'show', CHECKSUM_IFB]);
  if (r.code !== 0) return undefined;
  const [link] = JSON.parse(r.stdout) as Array<{ stats64: { tx: { packets: number } } }>;
  return link?.stats64.tx.packets;
}

function txChecksumming(ns: string): boolean {
  using home = NetnsHandle.current();
  using pod = NetnsHandle.open(netnsPath(ns));
  using eth = inNetns(pod, home, () => EthtoolSocket.open());
  return eth.txChecksumming('eth0');
}

const STACKS = [
  { name: 'IPv4-only', cidrs: ['10.244.5.0/24'], gateways: ['10.244.5.1'] },
  { name: 'IPv6-only', cidrs: ['fd00:10:244:5::/64'], gateways: ['fd00:10:244:5::1'] },
  {
    name: 'dual-stack',
    cidrs: ['10.244.5.0/24', 'fd00:10:244:5::/64'],
    gateways: ['10.244.5.1', 'fd00:10:244:5::1'],
  },
];

for (const stack of STACKS) {
  describe(`OVS (${OVS_DATAPATH}): ADD, CHECK, DEL (${stack.name})`, () => {
    const node = new TestNode({ datapath: 'ovs', podCIDRs: stack.cidrs });
    before(() => node.setup());
    after(() => node.cleanup());

    test('pods reach each other, the gateway and the node over ICMP and TCP; DEL leaves nothing', async () => {
      const pods = [await node.addPod('a'), await node.addPod('b')];
      const adds = [];
      for (const [i, pod] of pods.entries()) {
        const add = await node.cni({
          command: 'ADD',
          containerId: `ctr-${i}`,
          netns: pod,
          env: { CNI_ARGS: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-${i}` },
        });
        assert.equal(add.code, 0, add.stdout);
        adds.push(add);
        // Off on both OVS datapaths: the userspace one forwards frames as the pod left them (decision 8);
        // on the kernel one the checksum hop also completes what a pod that turns it on leaves pending
        // (decision 32), at about the same cost.
        assert.equal(txChecksumming(pod), false, `tx-checksumming on the pod side (${OVS_DATAPATH})`);
      }
      const [a, b] = pods as [string, string];
      // The kernel datapath's checksum hop (netdev-ingress-hop.ts): the pods' frames pass the node's
      // IFB before OVS sees them. The userspace datapath has none.
      const ifbBefore = await ifbTxPackets(node.nodeNs);
      assert.equal(
        ifbBefore === undefined,
        OVS_DATAPATH !== 'system',
        `the node's ${CHECKSUM_IFB} (${OVS_DATAPATH})`,
      );
      for (const gw of stack.gateways) assert.ok(await ping(a, gw), `pod -> gateway ${gw}`);
      if (ifbBefore !== undefined) {
        const passed = ((await ifbTxPackets(node.nodeNs)) ?? 0) - ifbBefore;
        assert.ok(passed >= stack.gateways.length, `frames of the pings through ${CHECKSUM_IFB}: ${passed}`);
      }
      for (const ip of resultIps(adds[1] as never)) {
        assert.ok(await ping(a, ip), `pod -> pod ${ip}`);
        assert.equal(await tcpExchange(b, ip, a), TCP_OK, `TCP pod -> pod ${ip}`);
        assert.equal(await tcpExchange(b, ip, node.nodeNs), TCP_OK, `TCP node -> pod ${ip}`);
      }
      for (const gw of stack.gateways) {
        assert.equal(await tcpExchange(node.nodeNs, gw, a), TCP_OK, `TCP pod -> node ${gw}`);
      }

      const check = await node.cni({
        command: 'CHECK',
        containerId: 'ctr-0',
        netns: a,
        conf: { prevResult: adds[0]?.json },
      });
      assert.equal(check.code, 0, check.stdout);

      // A flow removed behind the agent's back is drift that CHECK names.
      const veth0 = hostVethOf(adds[0] as never);
      const l2 = (await podFlowsOf(node, veth0)).find((f) => f.table === TABLE.L2_FORWARDING);
      assert.ok(l2);
      await ovsOf(node).ofctl(
        'del-flows',
        node.options.bridge,
        '--strict',
        `table=${l2.table},priority=${l2.priority},${l2.match.join(',')}`,
      );
      const drift = await node.cni({
        command: 'CHECK',
        containerId: 'ctr-0',
        netns: a,
        conf: { prevResult: adds[0]?.json },
      });
      assert.equal(drift.code, 1);
      assert.equal(drift.json?.code, 104, drift.stdout);
      assert.match(String(drift.json?.msg), /flows of .* differ: missing/);

      for (const [i, pod] of pods.entries()) {
        assert.equal((await node.cni({ command: 'DEL', containerId: `ctr-${i}`, netns: pod })).code, 0);
        assert.equal((await node.cni({ command: 'DEL', containerId: `ctr-${i}`, netns: pod })).code, 0);
        await node.ns.delete(pod);
        const gone = await node.cni({ command: 'DEL', containerId: `ctr-${i}`, netns: netnsPath(pod) });
        assert.equal(gone.code, 0, gone.stdout);
      }
      assert.deepEqual(await settledHostVeths(node.nodeNs, 0), [], 'no host veth left');
      assert.deepEqual(await ovsPorts(node), ['podwire-gw0'], 'only the gateway port');
      assert.deepEqual(await allPodFlows(node), [], 'no pod flow left');
      if (OVS_DATAPATH === 'system') {
        const hop = await nftIn(node.nodeNs).run(['list', 'table', 'netdev', HOP_TABLE]);
        assert.deepEqual(parseHopTable(hop), [], 'no checksum-hop chain left');
      }
    });
  });
}

describe(`OVS (${OVS_DATAPATH}): announcements and \`podwire flows\``, () => {
  const node = new TestNode({ datapath: 'ovs', podCIDRs: ['10.244.6.0/24', 'fd00:10:244:6::/64'] });
  before(() => node.setup());
  after(() => node.cleanup());

  test("each of the three GARPs and NAs is counted by the pod's own guard flow", async () => {
    const pod = await node.addPod('garp');
    const add = await node.cni({ command: 'ADD', containerId: 'garp', netns: pod });
    assert.equal(add.code, 0, add.stdout);
    const [v4, v6] = resultIps(add) as [string, string];
    const veth = hostVethOf(add);
    const garps = () =>
      podFlowsOf(node, veth).then((fs) => fs.find((f) => f.table === TABLE.ARP_SPOOF_GUARD)?.packets ?? 0);
    const nas = () =>
      podFlowsOf(node, veth).then(
        (fs) =>
          fs.find(
            (f) =>
              f.table === TABLE.ND_GUARD &&
              f.match.includes('icmp_type=136') &&
              f.match.includes(`nd_target=${v6}`) &&
              !f.match.includes('nd_tll=00:00:00:00:00:00'),
          )?.packets ?? 0,
      );
    assert.equal(await counterReaches(garps, 3), 3, `ARP guard flow of ${v4}`);
    assert.equal(await counterReaches(nas, 3), 3, `NA guard flow of ${v6}`);
    assert.equal(await dropped(node, TABLE.ARP_SPOOF_GUARD), 0, 'no ARP dropped');
    assert.equal((await node.cni({ command: 'DEL', containerId: 'garp', netns: pod })).code, 0);
  });

  test('`podwire flows` prints the pipeline; `--pod` one pod with its counters; an unknown pod fails', async () => {
    const pod = await node.addPod('cli');
    const add = await node.cni({
      command: 'ADD',
      containerId: 'cli-ctr',
      netns: pod,
      env: { CNI_ARGS: 'K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-0' },
    });
    assert.equal(add.code, 0, add.stdout);
    const cli = (...args: string[]) =>
      run(`${ROOT}/bin/podwire`, ['flows', '--config', node.configPath, ...args]);
    const all = await cli();
    assert.equal(all.code, 0, all.stderr);
    for (const name of [
      'CLASSIFIER',
      'ARP_SPOOF_GUARD',
      'ARP_RESPONDER',
      'ND_GUARD',
      'IP_SPOOF_GUARD',
      'L2_FORWARDING',
    ]) {
      assert.match(all.stdout, new RegExp(`^table \\d+ ${name}$`, 'm'));
    }
    assert.match(all.stdout, /\[pod shop\/cart-0\]/);
    const one = await cli('--pod', 'shop/cart-0');
    assert.equal(one.code, 0, one.stderr);
    assert.match(one.stdout, /^pod shop\/cart-0 +container cli-ctr +interface eth0$/m);
    assert.match(one.stdout, /^ +\d+ pkts +priority=200 arp,in_port=\d+,dl_src=0a:58:/m);
    assert.doesNotMatch(one.stdout, /\[pipeline\]/);
    // The port's counters (OFPMP_PORT_STATS, flow-report.ts): three pings to the gateway, inside the pod.
    const gateway = (JSON.parse(add.stdout) as { ips: Array<{ gateway: string }> }).ips[0]?.gateway as string;
    assert.ok(await ping(pod, gateway, 3), `pod -> gateway ${gateway}`);
    const byId = await cli('--pod', 'cli-ctr', '--json');
    assert.equal(byId.code, 0, byId.stderr);
    const parsed = JSON.parse(byId.stdout) as {
      containerId: string;
      flows: unknown[];
      counters: { rx: { packets: number; errors: number }; tx: { packets: number } };
    };
    assert.equal(parsed.containerId, 'cli-ctr');
    assert.ok(parsed.flows.length >= 3);
    assert.ok(parsed.counters.rx.packets >= 3, `from the pod: ${parsed.counters.rx.packets} packets`);
    assert.ok(parsed.counters.tx.packets >= 3, `to the pod: ${parsed.counters.tx.packets} packets`);
    assert.equal(parsed.counters.rx.errors, 0);
    const text = await cli('--pod', 'cli-ctr');
    assert.match(
      text.stdout,
      /^counters {2}from the pod: \d+ pkts \d+ bytes, \d+ dropped, 0 errors {2}to the pod: /m,
    );
    const none = await cli('--pod', 'shop/nothing');
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no pod port on br-podwire for shop\/nothing/);
    assert.equal((await node.cni({ command: 'DEL', containerId: 'cli-ctr', netns: pod })).code, 0);
  });
});

test('an unreachable OVSDB stops the agent at start with a message naming the socket', async () => {
  const node = new TestNode({ datapath: 'ovs', config: { ovsdb: 'unix:/run/pwt-nothing-here/db.sock' } });
  try {
    await assert.rejects(node.setup(), /agent exited 1/);
    assert.match(
      node.logs,
      /"msg":"agent failed to start","code":"ERR_NOT_AVAILABLE".*cannot connect to \/run\/pwt-nothing-here\/db\.sock/,
    );
  } finally {
    await node.cleanup();
  }
});
