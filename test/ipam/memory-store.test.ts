import { type MemoryBacking, MemoryStore } from '../../src/ipam/memory-store.js';
import { storeCompliance } from './store-compliance.js';

// Instances over one backing stand for clients of one shared store.
storeCompliance('MemoryStore', async () => {
  const backing: MemoryBacking = new Map();
  return {
    open: async () => new MemoryStore(backing),
    cleanup: async () => backing.clear(),
  };
});
