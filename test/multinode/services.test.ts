/**
 * kube-proxy compatibility (issue 13, item 2; decision 19), per datapath and per kube-proxy mode
 * (iptables through iptables-nft, and nftables): Service rules written by bed/kube-proxy.ts on every
 * node, exactly as kube-proxy writes them, and TCP and UDP (a DNS-like request/response) through them:
 *
 * | row | depends on (product) |
 * |---|---|
 * | pod -> ClusterIP -> backend on the same node | Linux bridge: bridge-nf-call-iptables=1, set by the agent (agent/startup/bridge-netfilter.ts); OVS: the GATEWAY_CT reply flows (datapath/ovs/pipeline.ts, conntrackFlows) |
 * | pod -> ClusterIP -> backend on the other node | the overlay (VXLAN) and the gateway |
 * | pod -> ClusterIP -> itself (hairpin, masquerade mark) | Linux bridge: pod ports in hairpin mode (BridgeDatapath.attachPort); OVS: the masqueraded frame comes back from the gateway port |
 * | node -> ClusterIP | the node's own stack (OUTPUT hook), the gateway and the overlay |
 * | underlay host -> NodePort on node 0 -> backend on node 1 | the overlay; kube-proxy's masquerade |
 *
 * Each mechanism is then taken away for a moment and the row that depends on it must fail: hairpin
 * off on the client's port, bridge-nf-call-iptables=0, the GATEWAY_CT reply flows deleted; an agent
 * restart (or hairpin back on) must restore it. The servers answer with the peer address they saw, so
 * the test also shows who was masqueraded (hairpin and NodePort) and who was not (pod to pod).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TestCluster } from '../../bed/cluster.js';
import { ipJson, must, run } from '../../bed/exec.js';
import {
  defaultRoute,
  iptablesChains,
  KubeProxy,
  type KubeProxyMode,
  nftablesChains,
  type ServiceSpec,
} from '../../bed/kube-proxy.js';
import { resultIps } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { TcpServers } from '../../bed/traffic.js';
import { hostVethName } from '../../src/agent/cni/host-veth.js';
import { TABLE } from '../../src/datapath/ovs/pipeline.js';

const PORT = 7777;
const CLUSTER_CIDR = '10.250.0.0/16';
const DATAPATHS: Array<'linux-bridge' | 'ovs'> = ['linux-bridge', 'ovs'];
const MODES: KubeProxyMode[] = ['iptables', 'nftables'];

/** TCP and UDP echo on PORT: the request, a space, and the peer address the server saw. */
const SERVER = `
import socket, threading
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', ${PORT})); s.listen(64)
    while True:
        c, peer = s.accept(); c.sendall(c.recv(64) + b' ' + peer[0].encode()); c.close()
threading.Thread(target=tcp, daemon=True).start()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(('0.0.0.0', ${PORT}))
print('ready', flush=True)
while True:
    data, peer = u.recvfrom(512); u.sendto(data + b' ' + peer[0].encode(), peer)
`;

/**
 * One request: TCP connect/send/receive, or UDP over a connected socket (which takes a reply only
 * from the address it sent to: an answer that was not un-NATed is not received). Prints the peer
 * address the server reported, or FAIL.
 */
const CLIENT = `
import socket, sys
proto, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    if proto == 'tcp':
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(2)
        s.connect((ip, port)); s.sendall(b'podwire'); r = s.recv(128)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); s.connect((ip, port))
        r = b''
        for _ in range(3):
            try:
                s.send(b'podwire'); r = s.recv(512); break
            except socket.timeout:
                pass
    word, peer = r.decode().split(' ')
    print(peer if word == 'podwire' else 'FAIL')
except Exception as e:
    print('FAIL', e)
`;

/** From namespace `ns`, one request to ip:port; the peer address the server saw, or undefined. */
async function request(
  ns: string,
  proto: 'tcp' | 'udp',
  ip: string,
  port: number,
): Promise<string | undefined> {
  const r = await run('ip', ['netns', 'exec', ns, '/usr/bin/python3', '-c', CLIENT, proto, ip, String(port)]);
  const out = r.stdout.trim();
  return out === '' || out.startsWith('FAIL') ? undefined : out;
}

test("kube-proxy's chain names: sha256 and base32 as kube-proxy derives them (its own test fixtures)", () => {
  const s: ServiceSpec = {
    namespace: 'ns1',
    name: 'svc1',
    portName: 'p80',
    clusterIP: '172.30.0.41',
    protocol: 'TCP',
    port: 80,
    endpoints: [{ ip: '10.180.0.1', port: 80 }],
  };
  assert.deepEqual(iptablesChains(s), {
    svc: 'KUBE-SVC-XPGD46QRK7WJZT7O',
    ext: 'KUBE-EXT-XPGD46QRK7WJZT7O',
    seps: ['KUBE-SEP-SXIVWICOYRO3J4NJ'],
  });
  assert.deepEqual(nftablesChains(s), {
    service: 'service-ULMVA6XW-ns1/svc1/tcp/p80',
    external: 'external-ULMVA6XW-ns1/svc1/tcp/p80',
    endpoints: ['endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80'],
  });
});

for (const datapath of DATAPATHS) {
  const skip = datapath === 'ovs' && !ovsAvailable() ? 'ovs-vswitchd/ovsdb-server not installed' : false;
  describe(`Services through kube-proxy's rules: ${datapath}`, { skip }, () => {
    const cluster = new TestCluster({ nodes: 2, store: 'file', trafficMode: 'encap', datapath });
    const servers = new TcpServers(SERVER);
    /** node 0: a (the client) and b; node 1: c. */
    const pods = { a: { ns: '', ip: '' }, b: { ns: '', ip: '' }, c: { ns: '', ip: '' } };
    let hostNs = '';
    let node0Ip = '';
    const gateway0 = '10.250.0.1';
    const vxlan0 = '10.250.0.0';

    /** The Services, TCP and UDP of each: ClusterIPs in 10.96.0.0/16. */
    const services = (): ServiceSpec[] => {
      const svc = (name: string, clusterIP: string, backend: string, nodePorts?: [number, number]) =>
        (['TCP', 'UDP'] as const).map((protocol, i) => ({
          namespace: 'default',
          name,
          portName: protocol === 'TCP' ? 'http' : 'dns',
          clusterIP,
          protocol,
          port: protocol === 'TCP' ? 80 : 53,
          ...(nodePorts ? { nodePort: nodePorts[i] as number } : {}),
          endpoints: [{ ip: backend, port: PORT }],
        }));
      return [
        ...svc('same-node', '10.96.0.11', pods.b.ip),
        ...svc('other-node', '10.96.0.12', pods.c.ip),
        ...svc('hairpin', '10.96.0.13', pods.a.ip),
        ...svc('nodeport', '10.96.0.14', pods.c.ip, [30080, 30053]),
      ];
    };

    /** Every protocol of a row: the peer address the server saw, per protocol. */
    async function both(ns: string, ip: string, tcpPort: number, udpPort: number) {
      return { tcp: await request(ns, 'tcp', ip, tcpPort), udp: await request(ns, 'udp', ip, udpPort) };
    }

    before(async () => {
      await cluster.setup();
      const [m0, m1] = cluster.members;
      assert.ok(m0 && m1);
      node0Ip = m0.underlay.ip;
      for (const [key, m] of [
        ['a', m0],
        ['b', m0],
        ['c', m1],
      ] as const) {
        const ns = await m.node.addPod(key);
        const add = await m.node.cni({ command: 'ADD', containerId: `svc-${key}`, netns: ns });
        assert.equal(add.code, 0, add.stdout);
        pods[key] = { ns, ip: resultIps(add)[0] as string };
      }
      hostNs = (await cluster.underlay.addNode('host')).ns;
      // As a real node has: a default route (a host-network process's packet to a ClusterIP is routed
      // before the OUTPUT hook DNATs it).
      for (const m of cluster.members) await defaultRoute(m.underlay.ns, cluster.underlay.hostIp);
      await servers.start([pods.a.ns, pods.b.ns, pods.c.ns]);
      // The overlay converges from the store within a moment of the last agent starting.
      const deadline = Date.now() + 10_000;
      while ((await request(pods.a.ns, 'tcp', pods.c.ip, PORT)) === undefined) {
        assert.ok(Date.now() < deadline, 'pod a never reached pod c directly');
      }
    });
    after(async () => {
      await servers.stop();
      await cluster.cleanup();
    });

    for (const mode of MODES) {
      describe(`kube-proxy ${mode} mode`, () => {
        const proxies: KubeProxy[] = [];

        before(async () => {
          for (const m of cluster.members) {
            const kp = new KubeProxy(m.underlay.ns, mode, {
              clusterCIDR: CLUSTER_CIDR,
              nodeIPs: [m.underlay.ip],
            });
            proxies.push(kp);
            await kp.apply(services());
          }
        });
        after(async () => {
          for (const kp of proxies) await kp.remove();
          for (const kp of proxies) {
            const left = await run('ip', ['netns', 'exec', kp.nodeNs, 'nft', 'list', 'ruleset']);
            assert.doesNotMatch(left.stdout, /kube-proxy|KUBE-/, 'the rules are gone');
          }
        });

        test('pod -> ClusterIP -> backend on the same node (TCP, UDP): the pod keeps its address', async () => {
          assert.deepEqual(await both(pods.a.ns, '10.96.0.11', 80, 53), { tcp: pods.a.ip, udp: pods.a.ip });
        });

        test('pod -> ClusterIP -> backend on the other node (TCP, UDP)', async () => {
          assert.deepEqual(await both(pods.a.ns, '10.96.0.12', 80, 53), { tcp: pods.a.ip, udp: pods.a.ip });
        });

        test('pod -> ClusterIP -> itself (hairpin, TCP, UDP): masqueraded to the gateway by the mark', async () => {
          assert.deepEqual(await both(pods.a.ns, '10.96.0.13', 80, 53), { tcp: gateway0, udp: gateway0 });
        });

        test('node -> ClusterIP, backend on the same node and on the other (TCP, UDP)', async () => {
          const ns = cluster.members[0]?.underlay.ns as string;
          // From outside the cluster CIDR: masqueraded on the way out, to the gateway or the VXLAN address.
          assert.deepEqual(await both(ns, '10.96.0.11', 80, 53), { tcp: gateway0, udp: gateway0 });
          assert.deepEqual(await both(ns, '10.96.0.12', 80, 53), { tcp: vxlan0, udp: vxlan0 });
        });

        test('underlay host -> NodePort on node 0 -> backend on node 1 (TCP, UDP)', async () => {
          assert.deepEqual(await both(hostNs, node0Ip, 30080, 30053), { tcp: vxlan0, udp: vxlan0 });
        });

        test("without kube-proxy's rules every row fails (the rows test the rules, not a shortcut)", async () => {
          for (const kp of proxies) await kp.remove();
          const ns0 = cluster.members[0]?.underlay.ns as string;
          const rows = await Promise.all([
            both(pods.a.ns, '10.96.0.11', 80, 53),
            both(pods.a.ns, '10.96.0.12', 80, 53),
            both(pods.a.ns, '10.96.0.13', 80, 53),
            both(ns0, '10.96.0.11', 80, 53),
            both(hostNs, node0Ip, 30080, 30053),
          ]);
          for (const row of rows) assert.deepEqual(row, { tcp: undefined, udp: undefined });
          for (const kp of proxies) await kp.apply(services());
        });

        // In both modes: bridge netfilter DNATs the hairpin packet in the bridge's prerouting (the
        // ClusterIP's backend is on the bridge, so it stays a bridged frame) and the bridge must send it
        // back out of the port it came in on. A routed packet (bridge-nf-call-iptables=0) would leave
        // through the bridge device and need no hairpin: this row proves the bridged path. The port's
        // hairpin flag is put back as it was, not forced on: a restore that forced it on once hid a
        // port attached without hairpin from the rows that ran after it.
        if (datapath === 'linux-bridge') {
          test('mechanism: without hairpin on the client port, the hairpin row fails', async () => {
            const veth = hostVethName('svc-a', 'eth0');
            const ns = cluster.members[0]?.underlay.ns as string;
            const [port] = await ipJson<Array<{ linkinfo?: { info_slave_data?: { hairpin?: boolean } } }>>(
              ns,
              ['-d', 'link', 'show', veth],
            );
            const was = port?.linkinfo?.info_slave_data?.hairpin === true;
            const setHairpin = (on: boolean) =>
              must('ip', [
                '-n',
                ns,
                'link',
                'set',
                veth,
                'type',
                'bridge_slave',
                'hairpin',
                on ? 'on' : 'off',
              ]);
            await setHairpin(false);
            try {
              assert.deepEqual(await both(pods.a.ns, '10.96.0.13', 80, 53), {
                tcp: undefined,
                udp: undefined,
              });
            } finally {
              await setHairpin(was);
            }
            assert.equal(was, true, 'the agent attached the pod port in hairpin mode');
            assert.deepEqual(await both(pods.a.ns, '10.96.0.13', 80, 53), { tcp: gateway0, udp: gateway0 });
          });
        }

        if (mode !== MODES[0]) return;
        if (datapath === 'linux-bridge') {
          test('mechanism: with bridge-nf-call-iptables=0 the same-node row fails; the agent sets it back', async () => {
            const m0 = cluster.members[0];
            assert.ok(m0);
            const sysctl = (v: string) =>
              must('ip', [
                'netns',
                'exec',
                m0.underlay.ns,
                'sysctl',
                '-qw',
                `net.bridge.bridge-nf-call-iptables=${v}`,
              ]);
            await sysctl('0');
            try {
              assert.deepEqual(await both(pods.a.ns, '10.96.0.11', 80, 53), {
                tcp: undefined,
                udp: undefined,
              });
            } finally {
              await m0.node.stopAgent('SIGTERM');
              await m0.node.startAgent();
            }
            const now = await must('ip', [
              'netns',
              'exec',
              m0.underlay.ns,
              'sysctl',
              '-n',
              'net.bridge.bridge-nf-call-iptables',
            ]);
            assert.equal(now.trim(), '1', 'set by the agent at start');
            assert.deepEqual(await both(pods.a.ns, '10.96.0.11', 80, 53), { tcp: pods.a.ip, udp: pods.a.ip });
          });
        } else {
          test('mechanism: without the GATEWAY_CT reply flows the same-node row fails; an agent restart restores them', async () => {
            const m0 = cluster.members[0];
            assert.ok(m0?.node.ovs);
            const target = m0.node.ovs.target('br-podwire');
            await must('ovs-ofctl', [
              '-O',
              'OpenFlow15',
              'del-flows',
              target,
              `table=${TABLE.GATEWAY_CT},ct_mark=0x1`,
            ]);
            try {
              assert.deepEqual(await both(pods.a.ns, '10.96.0.11', 80, 53), {
                tcp: undefined,
                udp: undefined,
              });
            } finally {
              await m0.node.stopAgent('SIGTERM');
              await m0.node.startAgent();
            }
            assert.deepEqual(await both(pods.a.ns, '10.96.0.11', 80, 53), { tcp: pods.a.ip, udp: pods.a.ip });
          });
        }
      });
    }
  });
}
