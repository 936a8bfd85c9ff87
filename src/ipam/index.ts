/** IPAM: node-local allocation of pod addresses, over a store seam (file now, etcd later). */

export {
  type Allocation,
  NodeLocalAllocator,
  type NodeLocalAllocatorOptions,
  type OwnedAllocation,
  parsePodCidrs,
} from './allocator.js';
export { Cidr, parseCidr } from './cidr.js';
export { FileStore } from './file-store.js';
export { canonicalIp, formatIp, type IpFamily, type IpValue, parseIp } from './ip.js';
export { type MemoryBacking, MemoryStore } from './memory-store.js';
export type { AllocationRecord, AttachmentKey, IpamStore, StoredClaim } from './store.js';
