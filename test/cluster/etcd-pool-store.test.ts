/** The pool seam's compliance suite on EtcdPoolStore: a real etcd (test bed), one key prefix per test. */
import type { EtcdStore } from '../../src/cluster/etcd-store.js';
import { etcdForFile, openEtcdStore } from './etcd-harness.js';
import { poolStoreCompliance } from './pool-store-compliance.js';

/** One etcd for the whole file; each test works under its own key prefix. */
const { server, freshPrefix } = etcdForFile('pools');
poolStoreCompliance('EtcdPoolStore', async () => {
  const s = await server();
  const prefix = freshPrefix();
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
