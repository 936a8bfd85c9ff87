/**
 * Cluster mode: 3 nodes x 4 pods on a static cluster file and on etcd, in encap and noEncap: the full
 * pod-to-pod matrix (ICMP and TCP), including pods on the same node, and node-to-remote-pod.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ClusterOptions, TestCluster } from '../../bed/cluster.js';
import { resultIps } from '../../bed/node.js';
import { pingFrom, TcpServers, tcpFrom } from '../../bed/traffic.js';

interface Pod {
  node: string;
  ns: string;
  ips: string[];
}

const MODES: ClusterOptions[] = [
  { nodes: 3, store: 'file', trafficMode: 'encap', ipv6: true },
  { nodes: 3, store: 'etcd', trafficMode: 'encap' },
  { nodes: 3, store: 'etcd', trafficMode: 'noEncap' },
  { nodes: 3, store: 'etcd', trafficMode: 'encap', datapath: 'ovs' },
  { nodes: 3, store: 'file', trafficMode: 'noEncap', datapath: 'ovs' },
];

for (const mode of MODES) {
  const name = `${mode.datapath ?? 'linux-bridge'}, ${mode.store} store, ${mode.trafficMode}${mode.ipv6 ? ', dual-stack' : ''}`;
  describe(`cluster: ${name}`, () => {
    const cluster = new TestCluster(mode);
    const servers = new TcpServers();
    const pods: Pod[] = [];

    before(async () => {
      await cluster.setup();
      await Promise.all(
        cluster.members.map(async (m) => {
          for (let i = 0; i < 4; i++) {
            const ns = await m.node.addPod(`p${i}`);
            const add = await m.node.cni({ command: 'ADD', containerId: `${m.name}-pod${i}`, netns: ns });
            assert.equal(add.code, 0, add.stdout);
            pods.push({ node: m.name, ns, ips: resultIps(add) });
          }
        }),
      );
    });
    after(async () => {
      await servers.stop();
      await cluster.cleanup();
    });

    test('every pod reaches every other pod (ICMP), on its node and across nodes', async () => {
      const deadline = Date.now() + 10_000;
      // Peers' routes converge from the store's watch within a moment of the last agent starting.
      let failures: string[] = [];
      do {
        failures = [];
        await Promise.all(
          pods.flatMap((from) =>
            pods
              .filter((to) => to !== from)
              .flatMap((to) =>
                to.ips.map(async (ip) => {
                  if (!(await pingFrom(from.ns, ip, 1)))
                    failures.push(`${from.node}/${from.ns} -> ${to.node} ${ip}`);
                }),
              ),
          ),
        );
      } while (failures.length > 0 && Date.now() < deadline);
      assert.deepEqual(failures, []);
    });

    test('every pod reaches every other pod over TCP', async () => {
      await servers.start(pods.map((p) => p.ns));
      const failures: string[] = [];
      await Promise.all(
        pods.map(async (from) => {
          const targets = pods.filter((p) => p !== from).flatMap((p) => p.ips);
          for (const [ip, ok] of Object.entries(await tcpFrom(from.ns, targets))) {
            if (!ok) failures.push(`${from.ns} -> ${ip}`);
          }
        }),
      );
      assert.deepEqual(failures, []);
    });

    test('a node reaches the pods of the other nodes', async () => {
      for (const m of cluster.members) {
        for (const p of pods.filter((x) => x.node !== m.name)) {
          for (const ip of p.ips)
            assert.ok(await pingFrom(m.underlay.ns, ip), `${m.name} -> ${p.node} ${ip}`);
        }
      }
    });
  });
}
