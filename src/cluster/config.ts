/**
 * The agent configuration's `cluster` section and the factory that opens the store it names:
 *
 *   cluster: {store: file, path: /etc/podwire/cluster.yaml}
 *   cluster: {store: etcd, endpoints: [http://10.0.0.1:2379], prefix: /podwire}
 *
 * `clusterCIDRs` and `nodeCIDRMaskSize` are separate top-level keys: see `parsePodCIDRPool` (pool.ts).
 */
import { isAbsolute } from 'node:path';
import { InvalidConfigError, type PodwireError } from '../base/errors.js';
import { parseEndpoint } from './etcd-gateway.js';
import { EtcdStore, type EtcdStoreOptions } from './etcd-store.js';
import { FileStore } from './file-store.js';
import type { ClusterStore } from './store.js';

export type ClusterStoreConfig =
  | { store: 'file'; path: string }
  | { store: 'etcd'; endpoints: string[]; prefix: string; requestTimeoutMs?: number };

const FILE_KEYS = new Set(['store', 'path']);
const ETCD_KEYS = new Set(['store', 'endpoints', 'prefix', 'requestTimeoutMs']);

/** Validates the section; errors are ERR_INVALID_CONFIG naming the key, e.g. "cluster.endpoints[1]: ...". */
export function parseClusterStoreConfig(value: unknown, key = 'cluster'): ClusterStoreConfig {
  const bad = (k: string, why: string): PodwireError => new InvalidConfigError(`${k}: ${why}`);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw bad(key, 'must be a mapping like {store: etcd, endpoints: [...]} or {store: file, path: ...}');
  }
  const obj = value as Record<string, unknown>;
  if (obj.store === 'file') {
    for (const k of Object.keys(obj))
      if (!FILE_KEYS.has(k)) throw bad(`${key}.${k}`, 'unknown key for store: file');
    if (typeof obj.path !== 'string' || !isAbsolute(obj.path))
      throw bad(`${key}.path`, 'must be an absolute path');
    return { store: 'file', path: obj.path };
  }
  if (obj.store === 'etcd') {
    for (const k of Object.keys(obj))
      if (!ETCD_KEYS.has(k)) throw bad(`${key}.${k}`, 'unknown key for store: etcd');
    if (!Array.isArray(obj.endpoints) || obj.endpoints.length === 0) {
      throw bad(`${key}.endpoints`, 'must be a non-empty list of http://HOST:PORT');
    }
    const endpoints = (obj.endpoints as unknown[]).map((e, i) => {
      if (typeof e !== 'string') throw bad(`${key}.endpoints[${i}]`, 'must be a string');
      try {
        return parseEndpoint(e).url;
      } catch (err) {
        throw new InvalidConfigError(
          `${key}.endpoints[${i}]: ${JSON.stringify(e)}: must be http://HOST:PORT`,
          {
            cause: err,
          },
        );
      }
    });
    const prefix = obj.prefix ?? '/podwire';
    if (typeof prefix !== 'string' || !/^(\/[A-Za-z0-9_.-]+)+$/.test(prefix)) {
      throw bad(`${key}.prefix`, 'must look like /podwire');
    }
    const out: ClusterStoreConfig = { store: 'etcd', endpoints, prefix };
    if (obj.requestTimeoutMs !== undefined) {
      const t = obj.requestTimeoutMs;
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 100 || t > 60_000) {
        throw bad(`${key}.requestTimeoutMs`, 'must be an integer from 100 to 60000');
      }
      out.requestTimeoutMs = t;
    }
    return out;
  }
  throw bad(`${key}.store`, 'must be "file" or "etcd"');
}

/** Extra collaborators and tuning that do not come from the configuration file (tests, the agent). */
export type ClusterStoreExtras = Omit<EtcdStoreOptions, 'endpoints' | 'prefix'> & {
  filePollIntervalMs?: number;
};

/** Opens the configured store. A bad cluster file fails here; an unreachable etcd only shows in health(). */
export function openClusterStore(
  config: ClusterStoreConfig,
  extras: ClusterStoreExtras = {},
): Promise<ClusterStore> {
  if (config.store === 'file') {
    const opts = extras.filePollIntervalMs === undefined ? {} : { pollIntervalMs: extras.filePollIntervalMs };
    return FileStore.open({ path: config.path, ...opts });
  }
  const { filePollIntervalMs: _unused, ...etcdExtras } = extras;
  return EtcdStore.open({
    ...etcdExtras,
    endpoints: config.endpoints,
    prefix: config.prefix,
    ...(config.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: config.requestTimeoutMs }),
  });
}
