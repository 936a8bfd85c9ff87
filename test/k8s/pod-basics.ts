/**
 * Part a of test:k8s, shared by both datapaths: a Deployment of agnhost on both nodes, each pod's
 * address in its node's spec.podCIDRs, pod to pod on one node and across nodes, pod to node, pod to a
 * plain host on the underlay (masqueraded to the node's address).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeCluster } from '../../bed/k8s/kube-cluster.js';
import {
  apply,
  execPod,
  ipv4InCidr,
  netexecDeployment,
  nodePodCIDRs,
  type PodInfo,
  podGet,
  pods,
  type UnderlayHost,
  waitDeployment,
} from '../../bed/k8s/workloads.js';

export function podBasics(get: () => { cluster: KubeCluster; host: UnderlayHost }): void {
  describe('a. pods on both nodes', () => {
    let c: { cluster: KubeCluster; host: UnderlayHost };
    let web: PodInfo[];

    test("a Deployment of agnhost spreads on both nodes, each pod in its node's spec.podCIDRs", async () => {
      c = get();
      await apply(c.cluster, [netexecDeployment('web', 4)]);
      await waitDeployment(c.cluster, 'web');
      web = await pods(c.cluster, 'app=web');
      const cidrs = await nodePodCIDRs(c.cluster);
      assert.deepEqual(new Set(web.map((p) => p.node)), new Set(['node-0', 'node-1']));
      for (const p of web) {
        const own = cidrs.get(p.node) ?? [];
        assert.ok(
          own.some((c) => ipv4InCidr(p.ip, c)),
          `${p.name} ${p.ip} not in ${p.node}'s ${own}`,
        );
      }
    });

    test('pod to pod on the same node and across nodes (HTTP and ping)', async () => {
      const from = web.find((p) => p.node === 'node-0') as PodInfo;
      const same = web.find((p) => p.node === 'node-0' && p !== from) as PodInfo;
      const other = web.find((p) => p.node === 'node-1') as PodInfo;
      assert.equal(await podGet(c.cluster, from.name, `http://${same.ip}:8080/hostname`), same.name);
      assert.equal(await podGet(c.cluster, from.name, `http://${other.ip}:8080/hostname`), other.name);
      const ping = await execPod(c.cluster, from.name, ['ping', '-c', '2', '-W', '3', other.ip]);
      assert.equal(ping.code, 0, ping.stdout + ping.stderr);
      // The peer sees the pod's own address (no masquerade inside the c.cluster).
      const seen = await podGet(c.cluster, from.name, `http://${other.ip}:8080/clientip`);
      assert.equal(seen.split(':')[0], from.ip);
    });

    test('pod to node: its own node and the other', async () => {
      const from = web.find((p) => p.node === 'node-0') as PodInfo;
      for (const n of c.cluster.nodes) {
        const ping = await execPod(c.cluster, from.name, ['ping', '-c', '1', '-W', '3', n.ip]);
        assert.equal(ping.code, 0, `${from.name} to ${n.name} ${n.ip}: ${ping.stdout}${ping.stderr}`);
      }
    });

    test("pod to a plain host on the underlay: masqueraded to the node's address", async () => {
      for (const p of [
        web.find((x) => x.node === 'node-0'),
        web.find((x) => x.node === 'node-1'),
      ] as PodInfo[]) {
        const seen = await podGet(c.cluster, p.name, `http://${c.host.ip}:8080/clientip`);
        const node = c.cluster.nodes.find((n) => n.name === p.node);
        assert.equal(seen.split(':')[0], node?.ip, `${p.name} seen as ${seen}`);
      }
    });
  });
}
