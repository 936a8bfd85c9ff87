/**
 * In bridging mode only pool pods share the underlay's L2; a plain pod (an address of the node's pod
 * CIDRs) is node-local, and the node routes its traffic (docs/decisions/0030-plain-pods-off-the-uplink.md).
 * Found in a review: a plain pod that learnt an underlay host's MAC sent it frames straight out of the
 * uplink (on the Linux bridge masqueraded to the node's IP, with the pod's MAC), its broadcasts and
 * IPv6 link-local traffic left the same way, and an underlay host reached the pod at L2, past the node.
 *
 * Per datapath, a node in bridging mode whose uplink is a veth into an "underlay" namespace. A plain
 * dual-stack pod sends the underlay host unicast (to its MAC, by a neighbour entry of its own), a
 * broadcast and an IPv6 ping to the host's link-local address: no frame with the pod's MAC reaches
 * the underlay. The host sends the pod unicast to its MAC, an IPv4 broadcast and an IPv6 all-nodes
 * ping: no frame from the host's MAC reaches the pod. Routed traffic still flows both ways through
 * the node (pod to host, masqueraded; node to pod); pool pods' L2 on the underlay is shown by
 * `test/multinode/bridging.test.ts`.
 *
 * The captures run throughout, so routed and DNATed traffic must not show the pod's or the host's MAC
 * across the uplink either: on the Linux bridge, bridge netfilter forwards a packet the node DNATs
 * (a masqueraded ping's reply, the Service, the NodePort) as a bridged frame, which the `forward`
 * chain gives the node's MAC.
 *
 * Fails when the mechanism is removed:
 * - Linux bridge: the `forward` chain of `linux-bridge/pod-guard.ts` (its drop rules, one per
 *   direction; its source MAC rewrites; the uplink and its MAC from `attachUplink`);
 * - OVS: `uplinkFlows` of `ovs/pipeline.ts` sends only reg2=1 frames (the gateway's, pool pods') out
 *   of the uplink, the uplink is no-flood, its multicast goes only to the gateway and untagged pool
 *   pods (`underlayFloodFlow`), and a plain pod's delivery flow takes no frame marked as from the
 *   uplink (`podFlows`, reg2=0/0x2).
 * The mutations `lb-uplink-guard-out`, `lb-uplink-guard-in`, `lb-uplink-guard-no-host-exception`,
 * `lb-bridged-dnat-keeps-pod-mac`, `ovs-uplink-output-any-pod`,
 * `ovs-plain-pod-takes-uplink-frames` and `ovs-uplink-floods` in `scripts/mutate.mjs` check this.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BRIDGED_NODE_IP, bridgedNode, UNDERLAY_HOST_IP } from '../../../bed/bridged-node.js';
import { ipJson, must, run } from '../../../bed/exec.js';
import { KubeProxy, type ServiceEndpoint, type ServiceSpec } from '../../../bed/kube-proxy.js';
import { NamespaceSet } from '../../../bed/namespaces.js';
import { resultIps, type TestNode } from '../../../bed/node.js';
import { ovsAvailable } from '../../../bed/ovs.js';
import { capture } from '../../../bed/tcpdump.js';
import { pingFrom, TCP_PORT, TcpServers, tcpFrom } from '../../../bed/traffic.js';
import { eui64LinkLocal } from '../../../src/base/mac.js';

const POD_CIDR = '10.244.73.0/24';
const POD_CIDR6 = 'fd00:73::/64';

const datapaths: Array<'linux-bridge' | 'ovs'> = ovsAvailable() ? ['linux-bridge', 'ovs'] : ['linux-bridge'];

async function macOf(ns: string, ifname: string): Promise<string> {
  const [l] = await ipJson<Array<{ address: string }>>(ns, ['link', 'show', ifname]);
  if (!l) throw new Error(`${ifname} in ${ns}`);
  return l.address;
}

function service(name: string, clusterIP: string, endpoint: ServiceEndpoint): ServiceSpec {
  return { namespace: 'default', name, clusterIP, protocol: 'TCP', port: TCP_PORT, endpoints: [endpoint] };
}

/** Runs a command in `ns` whose outcome does not matter: only what the captures see. */
function inNs(ns: string, cmd: string[]): Promise<unknown> {
  return run('ip', ['netns', 'exec', ns, ...cmd]);
}

for (const datapath of datapaths) {
  describe(`bridging mode (${datapath}): a plain pod and the underlay share no L2`, () => {
    const spaces = new NamespaceSet();
    let node: TestNode;
    let nodeNs = '';
    let underlay = '';
    const servers = new TcpServers();

    before(async () => {
      ({ node, nodeNs, underlay } = await bridgedNode(spaces, 'plain', datapath, [POD_CIDR, POD_CIDR6]));
    });

    after(async () => {
      await servers.stop();
      await node?.cleanup();
      await spaces.cleanup();
    });

    test('no frame between the plain pod and the uplink, either way; routed traffic still flows', async () => {
      const podNs = await node.addPod('plain');
      const add = await node.cni({ command: 'ADD', containerId: 'plain', netns: podNs });
      assert.equal(add.code, 0, add.stdout);
      const ips = resultIps(add);
      const pod4 = ips.find((ip) => !ip.includes(':')) as string;
      assert.ok(pod4 && ips.length === 2, ips.join());
      const podMac = await macOf(podNs, 'eth0');
      const hostMac = await macOf(underlay, 'wire0');
      // Watched from here on: what leaves the uplink with the pod's MAC, what reaches the pod with the
      // host's. Routed and DNATed traffic below too: on the Linux bridge, bridge netfilter bridges a
      // packet the node DNATs to the same bridge, and that frame must carry the node's MAC.
      const out = await capture(underlay, 'wire0', `ether src ${podMac}`);
      const into = await capture(podNs, 'eth0', `ether src ${hostMac}`);

      // Routed, through the node: the pod reaches the host (masqueraded), the node reaches the pod.
      assert.ok(
        await pingFrom(podNs, UNDERLAY_HOST_IP),
        'the pod reaches the underlay host through its node',
      );
      assert.ok(await pingFrom(nodeNs, pod4), 'the node reaches the pod');
      // Through the node's DNAT (kube-proxy's rules, nftables mode: the qemu guest of test:vm has no
      // xtables modules): the pod reaches a Service whose endpoint is the underlay host, and the host
      // reaches the pod through a NodePort.
      const proxy = new KubeProxy(nodeNs, 'nftables', { clusterCIDR: POD_CIDR, nodeIPs: [BRIDGED_NODE_IP] });
      await servers.start([podNs, underlay]);
      try {
        await proxy.apply([
          service('to-host', '10.96.73.10', { ip: UNDERLAY_HOST_IP, port: TCP_PORT }),
          { ...service('to-pod', '10.96.73.11', { ip: pod4, port: TCP_PORT }), nodePort: TCP_PORT },
        ]);
        assert.deepEqual(
          await tcpFrom(podNs, ['10.96.73.10']),
          { '10.96.73.10': true },
          'pod to a Service on the underlay',
        );
        assert.deepEqual(
          await tcpFrom(underlay, [BRIDGED_NODE_IP]),
          { [BRIDGED_NODE_IP]: true },
          'host to a NodePort',
        );
      } finally {
        await proxy.remove();
        await servers.stop();
      }

      // Out: the pod addresses the host at L2 (its MAC by a neighbour entry, a broadcast, link-local).
      await must('ip', ['-n', podNs, 'route', 'replace', `${UNDERLAY_HOST_IP}/32`, 'dev', 'eth0']);
      await must('ip', [
        ...['-n', podNs, 'neigh', 'replace', UNDERLAY_HOST_IP],
        ...['lladdr', hostMac, 'dev', 'eth0', 'nud', 'permanent'],
      ]);
      const hostLl = eui64LinkLocal(hostMac);
      await Promise.all([
        inNs(podNs, ['ping', '-c', '2', '-i', '0.2', '-W', '1', UNDERLAY_HOST_IP]),
        inNs(podNs, ['ping', '-b', '-c', '2', '-i', '0.2', '-W', '1', '255.255.255.255']),
        inNs(podNs, ['ping', '-6', '-c', '2', '-i', '0.2', '-W', '1', `${hostLl}%eth0`]),
      ]);

      // In: the host addresses the pod at L2 (its MAC by a neighbour entry, broadcast, all-nodes).
      await must('ip', ['-n', underlay, 'route', 'replace', `${pod4}/32`, 'dev', 'wire0']);
      await must('ip', [
        ...['-n', underlay, 'neigh', 'replace', pod4],
        ...['lladdr', podMac, 'dev', 'wire0', 'nud', 'permanent'],
      ]);
      await Promise.all([
        inNs(underlay, ['ping', '-c', '2', '-i', '0.2', '-W', '1', pod4]),
        inNs(underlay, ['ping', '-b', '-c', '2', '-i', '0.2', '-W', '1', '192.0.2.255']),
        inNs(underlay, ['ping', '-6', '-c', '2', '-i', '0.2', '-W', '1', 'ff02::1%wire0']),
      ]);
      assert.deepEqual(await out.stop(), [], "no frame with the plain pod's MAC reached the underlay");
      assert.deepEqual(await into.stop(), [], "no frame from the underlay host's MAC reached the plain pod");

      // The node still reaches the underlay host, and the pod still its node.
      assert.ok(await pingFrom(nodeNs, UNDERLAY_HOST_IP), 'the node reaches the underlay host');
      assert.equal((await node.cni({ command: 'DEL', containerId: 'plain', netns: podNs })).code, 0);
    });
  });
}
