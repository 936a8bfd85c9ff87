/** Test helpers for IP pools as IPPool objects (src/cluster/kube-pools.ts) on the bed's real kube-apiserver. */
import { after } from 'node:test';
import { KubeApiServer } from '../../bed/kube-api.js';
import { KubePoolStore } from '../../src/cluster/kube-pools.js';
import { KubeClient } from '../../src/kube/kube-client.js';
import { kubeconfigConnection } from '../../src/kube/kube-config.js';
import { Recorder } from './kube-harness.js';

/** One API server for the calling test file, started at first use with the CRD installed, removed after the file. */
export function kubeApiForFile(): () => Promise<KubeApiServer> {
  let server: KubeApiServer | undefined;
  let starting: Promise<KubeApiServer> | undefined;
  after(async () => {
    await server?.cleanup();
  });
  return () => {
    starting ??= (async () => {
      const s = await KubeApiServer.start();
      server = s;
      await s.installPoolCrd();
      return s;
    })();
    return starting;
  };
}

/** One node's client of the pools: its own connection and its own watch. */
export interface PoolNode {
  client: KubeClient;
  store: KubePoolStore;
}

export function openNode(s: KubeApiServer, log = new Recorder<unknown>().log): PoolNode {
  const client = new KubeClient(kubeconfigConnection(s.kubeconfig), {
    connect: s.connect,
    requestTimeoutMs: 20_000,
  });
  const store = new KubePoolStore({ client, where: 'test', log });
  store.start();
  return { client, store };
}

export async function closeNode(n: PoolNode): Promise<void> {
  await n.store.stop();
  n.client.close();
}

export async function deleteAllPools(s: KubeApiServer): Promise<void> {
  await s.kubectlOk(['delete', 'ippools.podwire.io', '--all', '--wait=true']);
}
