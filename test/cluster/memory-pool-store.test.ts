import { MemoryPoolStore, memoryPoolBacking } from '../../src/cluster/memory-pool-store.js';
import { poolStoreCompliance } from './pool-store-compliance.js';

// Instances over one backing stand for the nodes of one cluster.
poolStoreCompliance('MemoryPoolStore', async () => {
  const backing = memoryPoolBacking();
  return {
    open: async () => new MemoryPoolStore(backing),
    cleanup: async () => {
      backing.pools.clear();
      backing.claims.clear();
    },
  };
});
