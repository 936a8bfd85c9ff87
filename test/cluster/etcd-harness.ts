/** Opening EtcdStore clients against a test-bed etcd, with test-friendly timings. */

import { after } from 'node:test';
import { EtcdServer } from '../../bed/etcd.js';
import { EtcdStore, type EtcdStoreOptions } from '../../src/cluster/etcd-store.js';
import { nodesEqual } from '../../src/cluster/node-record.js';
import type { ClusterStore, NodeRecord } from '../../src/cluster/store.js';

/** Short timeouts so that outage tests stay fast; production defaults are 2 s / 5 s / 5 s. */
export const FAST = { requestTimeoutMs: 1000, healthIntervalMs: 300, maxBackoffMs: 1000 } as const;

export function openEtcdStore(
  server: EtcdServer,
  prefix: string,
  extra: Partial<EtcdStoreOptions> = {},
): Promise<EtcdStore> {
  return EtcdStore.open({ endpoints: [server.endpoint], connect: server.connect, prefix, ...FAST, ...extra });
}

/** Makes the store hold exactly `nodes`: puts what differs, deletes what is not listed. */
export async function setNodes(store: ClusterStore, nodes: NodeRecord[]): Promise<void> {
  const current = await store.listNodes();
  for (const s of current.nodes) {
    if (!nodes.some((n) => n.name === s.node.name)) await store.deleteNode(s.node.name);
  }
  for (const n of nodes) {
    const before = current.nodes.find((s) => s.node.name === n.name);
    if (before !== undefined && nodesEqual(before.node, n)) continue;
    const res = await store.putNode(n, before === undefined ? 'absent' : { version: before.version });
    if (!res.ok) throw new Error(`setNodes: conflict on ${n.name}`);
  }
}

/**
 * One etcd for a whole test file, started on first use and stopped after the file (call at the
 * file's top level); each test works under a prefix of its own, `/pwt/TAG1`, `/pwt/TAG2`, ...
 */
export function etcdForFile(
  tag: string,
  options?: Parameters<typeof EtcdServer.start>[0],
): { server: () => Promise<EtcdServer>; freshPrefix: () => string } {
  let shared: Promise<EtcdServer> | undefined;
  let seq = 0;
  after(async () => {
    if (shared !== undefined) await (await shared).cleanup();
  });
  return {
    server: () => {
      shared ??= EtcdServer.start(options);
      return shared;
    },
    freshPrefix: () => `/pwt/${tag}${++seq}`,
  };
}
