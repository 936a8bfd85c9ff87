/** The cluster layer: where cluster-wide state lives (DESIGN.md, "Layers"). */
export {
  type ClusterStoreConfig,
  type ClusterStoreExtras,
  openClusterStore,
  parseClusterStoreConfig,
} from './config.js';
export type { ConnectFn } from './etcd-gateway.js';
export { EtcdStore, type EtcdStoreOptions } from './etcd-store.js';
export { FileStore, type FileStoreOptions } from './file-store.js';
export { parsePodCIDRPool } from './pool.js';
export { registerNode, removeNode } from './register.js';
export type {
  ClusterStore,
  NodeEvent,
  NodeList,
  NodeRecord,
  OpOptions,
  PodCIDRPool,
  Precondition,
  PutResult,
  StoredNode,
  StoreHealth,
  WatchOptions,
} from './store.js';
