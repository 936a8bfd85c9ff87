/** The pool seam's compliance suite on EtcdPoolStore: a real etcd (test bed), one key prefix per test. */
import { after } from 'node:test';
import { EtcdServer } from '../../bed/etcd.js';
import type { EtcdStore } from '../../src/cluster/etcd-store.js';
import { openEtcdStore } from './etcd-harness.js';
import { poolStoreCompliance } from './pool-store-compliance.js';

let shared: Promise<EtcdServer> | undefined;
function server(): Promise<EtcdServer> {
  shared ??= EtcdServer.start();
  return shared;
}
after(async () => {
  if (shared !== undefined) await (await shared).cleanup();
});

let seq = 0;
poolStoreCompliance('EtcdPoolStore', async () => {
  const s = await server();
  seq += 1;
  const prefix = `/pwt/pools${seq}`;
  const opened: EtcdStore[] = [];
  return {
    // Each client is its own EtcdStore, as each node's agent is.
    open: async () => {
      const store = await openEtcdStore(s, prefix);
      opened.push(store);
      return store.pools;
    },
    cleanup: async () => {
      for (const store of opened) await store.close();
    },
  };
});
