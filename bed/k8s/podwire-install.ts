/**
 * podwire installed on the bed's cluster as a user installs it (deploy/README.md): the RBAC,
 * deploy/configmap.yaml (the Kubernetes API as the cluster store: nothing to fill in but the datapath
 * and, dual-stack, nothing more) and deploy/daemonset.yaml; then the DaemonSet's rollout, Ready
 * through its own probes. With `store: 'etcd'`, the etcd-tls example instead (deploy/etcd-tls/README.md):
 * the Secret created with kubectl from the bed's etcd client files, the etcd-tls ConfigMap with this
 * cluster's values (etcd's endpoint, the cluster CIDRs, no etcd users: the bed's etcd has client
 * certificates only), and the DaemonSet patched with deploy/etcd-tls/daemonset-patch.yaml.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { EtcdServer } from '../etcd.js';
import { type KubeCluster, POD_CIDR_V4, POD_CIDR_V6 } from './kube-cluster.js';

export const DEPLOY_DIR = new URL('../../../deploy/', import.meta.url).pathname;

export interface PodwireInstallOptions {
  /** linux-bridge, or OVS on its userspace datapath (no openvswitch module on this machine). */
  datapath: 'linux-bridge' | 'ovs-netdev';
  /** The cluster store: the Kubernetes API (deploy/'s default) or the etcd-tls example. */
  store?: 'kubernetes' | 'etcd';
}

/** deploy/configmap.yaml (or deploy/etcd-tls/configmap.yaml) with this cluster's values. */
export function clusterConfigMap(cluster: KubeCluster, o: PodwireInstallOptions): string {
  const etcdStore = o.store === 'etcd';
  const file = etcdStore
    ? join(DEPLOY_DIR, 'etcd-tls', 'configmap.yaml')
    : join(DEPLOY_DIR, 'configmap.yaml');
  const cm = parse(readFileSync(file, 'utf8'));
  const agent = parse(cm.data['agent.yaml']);
  if (etcdStore) {
    const etcd = cluster.etcd as EtcdServer;
    agent.cluster.endpoints = [etcd.endpoint];
    delete agent.cluster.auth;
    const v6 = cluster.options.dualStack ?? false;
    agent.clusterCIDRs = v6 ? [POD_CIDR_V4, POD_CIDR_V6] : [POD_CIDR_V4];
    agent.nodeCIDRMaskSize = v6 ? { ipv4: 24, ipv6: 64 } : { ipv4: 24 };
  }
  if (o.datapath === 'ovs-netdev') {
    agent.datapath = 'ovs';
    agent.ovsDatapathType = 'netdev';
  }
  cm.data['agent.yaml'] = stringify(agent);
  return stringify(cm);
}

export async function installPodwire(cluster: KubeCluster, o: PodwireInstallOptions): Promise<void> {
  const t0 = Date.now();
  await cluster.kubectlOk(['apply', '-f', join(DEPLOY_DIR, 'rbac.yaml')]);
  if (o.store === 'etcd') {
    const etcdPki = (cluster.etcd as EtcdServer).pki as NonNullable<EtcdServer['pki']>;
    // biome-ignore format: flag/value pairs
    await cluster.kubectlOk([
      '-n', 'kube-system', 'create', 'secret', 'generic', 'podwire-etcd',
      `--from-file=ca.crt=${etcdPki.ca}`,
      `--from-file=tls.crt=${etcdPki.clientCert}`,
      `--from-file=tls.key=${etcdPki.clientKey}`,
    ]);
  }
  const cm = join(cluster.dir, 'podwire-configmap.yaml');
  writeFileSync(cm, clusterConfigMap(cluster, o));
  await cluster.kubectlOk(['apply', '-f', cm]);
  await applyDaemonSet(cluster, o.store ?? 'kubernetes');
  await waitRollout(cluster);
  process.stderr.write(`k8s-bed: podwire DaemonSet ready after ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
}

/** deploy/daemonset.yaml as it is, or with the etcd-tls patch as deploy/etcd-tls/README.md applies it. */
export async function applyDaemonSet(
  cluster: KubeCluster,
  store: 'kubernetes' | 'etcd' = 'kubernetes',
): Promise<void> {
  if (store === 'kubernetes') {
    await cluster.kubectlOk(['apply', '-f', join(DEPLOY_DIR, 'daemonset.yaml')]);
    return;
  }
  // biome-ignore format: flag/value pairs
  const patched = await cluster.kubectlOk([
    'patch', '--local', '-f', join(DEPLOY_DIR, 'daemonset.yaml'), '--type', 'strategic',
    '--patch-file', join(DEPLOY_DIR, 'etcd-tls', 'daemonset-patch.yaml'), '-o', 'yaml',
  ]);
  await cluster.kubectlOk(['apply', '-f', '-'], { input: patched });
}

export async function waitRollout(cluster: KubeCluster, timeoutS = 400): Promise<void> {
  const r = await cluster.kubectl(
    ['-n', 'kube-system', 'rollout', 'status', 'ds/podwire', `--timeout=${timeoutS}s`],
    {
      timeoutMs: (timeoutS + 30) * 1000,
    },
  );
  if (r.code !== 0) {
    const pods = await cluster.kubectl(['-n', 'kube-system', 'get', 'pods', '-o', 'wide']);
    const events = await cluster.kubectl(['-n', 'kube-system', 'get', 'events', '--sort-by=.lastTimestamp']);
    throw new Error(
      `podwire DaemonSet not ready: ${r.stderr}\n${pods.stdout}\n${events.stdout.split('\n').slice(-30).join('\n')}`,
    );
  }
}
