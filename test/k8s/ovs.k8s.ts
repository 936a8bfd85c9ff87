/**
 * podwire on a real Kubernetes cluster with OVS on its userspace datapath (issue 26, part f): the
 * DaemonSet's ovs container runs Open vSwitch (`datapath: ovs`, `ovsDatapathType: netdev` in the
 * ConfigMap: this machine has no openvswitch module), with the etcd-tls example's cluster store (an etcd
 * of podwire's, the option deploy/etcd-tls/ documents; or the Kubernetes API, PODWIRE_K8S_OVS_STORE),
 * then part a again; the teardown leaves nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { KubeCluster } from '../../bed/k8s/kube-cluster.js';
import { installPodwire } from '../../bed/k8s/podwire-install.js';
import { execPod, pods, UnderlayHost } from '../../bed/k8s/workloads.js';
import { type MachineState, machineState, processesNaming } from './leftovers.js';
import { podBasics } from './pod-basics.js';

/**
 * etcd by default: the Linux bridge file runs deploy/ as it is (the Kubernetes API), this one keeps the
 * etcd-tls example tried on a real cluster. PODWIRE_K8S_OVS_STORE=kubernetes runs OVS on deploy/'s default.
 */
const STORE = process.env.PODWIRE_K8S_OVS_STORE === 'kubernetes' ? 'kubernetes' : 'etcd';

let cluster: KubeCluster;
let host: UnderlayHost;
let before0: MachineState;

describe('podwire on a Kubernetes cluster, OVS userspace datapath', { timeout: 1_200_000 }, () => {
  before(async () => {
    before0 = machineState();
    cluster = new KubeCluster({ nodes: 2 });
    await cluster.setup();
    await installPodwire(cluster, { datapath: 'ovs-netdev', store: STORE });
    host = await new UnderlayHost(cluster).setup();
  });

  after(async () => {
    await host?.cleanup();
    await cluster?.cleanup();
  });

  test('every agent runs the OVS datapath, on the netdev (userspace) datapath', async () => {
    for (const a of await pods(cluster, 'app.kubernetes.io/name=podwire', 'kube-system')) {
      const r = await execPod(cluster, a.name, ['ovs-vsctl', 'list-br'], 'kube-system', 'ovs');
      assert.equal(r.code, 0, r.stderr);
      const br = r.stdout.trim().split('\n')[0] as string;
      const dp = await execPod(
        cluster,
        a.name,
        ['ovs-vsctl', 'get', 'bridge', br, 'datapath_type'],
        'kube-system',
        'ovs',
      );
      assert.equal(dp.stdout.trim(), 'netdev', `${a.node}: ${dp.stdout}${dp.stderr}`);
    }
  });

  podBasics(() => ({ cluster, host }));

  test('teardown leaves nothing', async () => {
    const dir = cluster.dir;
    const cgroups = cluster.nodes.map((n) => n.cgroup.path.slice(1));
    await host.cleanup();
    await cluster.cleanup();
    const now = machineState();
    assert.deepEqual(processesNaming([dir, ...cgroups]), []);
    assert.deepEqual(
      now.cgroups.filter((c) => cgroups.some((g) => c.includes(g))),
      [],
    );
    assert.deepEqual(
      now.mounts.filter((m) => m.includes(dir)),
      [],
    );
    assert.deepEqual(now.sysctls, before0.sysctls);
  });
});
