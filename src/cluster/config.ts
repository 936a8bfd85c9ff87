/**
 * The agent configuration's `cluster` section and the factory that opens the store it names:
 *
 *   cluster: {store: file, path: /etc/podwire/cluster.yaml}
 *   cluster:
 *     store: etcd
 *     endpoints: [https://10.0.0.1:2379]
 *     prefix: /podwire
 *     tls: {ca: /etc/podwire/etcd/ca.crt, cert: /etc/podwire/etcd/client.crt, key: /etc/podwire/etcd/client.key}
 *     auth: {username: podwire, passwordFile: /etc/podwire/etcd/password}   # optional
 *   cluster: {store: etcd, endpoints: [http://10.0.0.1:2379], insecure: true}   # plain http: say so
 *
 * Plain http (anyone on the path reads and rewrites node records, leases and pools) is refused
 * unless `insecure: true` (issue 15, finding 1); the agent then warns at start. The files are read
 * when the store opens, and a bad one is an error naming its key; they are read again before every
 * health probe, so rotated certificates and passwords are picked up without a restart.
 *
 * `clusterCIDRs` and `nodeCIDRMaskSize` are separate top-level keys: see `parsePodCIDRPool` (pool.ts).
 */
import { readFile } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import { InvalidConfigError, type PodwireError } from '../base/errors.js';
import { inClusterConnection, kubeconfigConnection } from '../kube/kube-config.js';
import type { KubeLog } from '../kube/reflector.js';
import { parseEndpoint } from './etcd-endpoint.js';
import type { EtcdAuth } from './etcd-gateway.js';
import { EtcdStore, type EtcdStoreOptions } from './etcd-store.js';
import type { EtcdTls } from './etcd-tls.js';
import { FileStore } from './file-store.js';
import { KubeStore } from './kube-store.js';
import type { ClusterStore } from './store.js';

/** Paths of PEM files. */
export interface EtcdTlsConfig {
  ca?: string;
  cert?: string;
  key?: string;
}

export interface EtcdAuthConfig {
  username: string;
  /** A file holding the password (a mounted Secret), so that it is never in the ConfigMap. */
  passwordFile: string;
}

export interface EtcdStoreConfig {
  store: 'etcd';
  endpoints: string[];
  prefix: string;
  requestTimeoutMs?: number;
  tls?: EtcdTlsConfig;
  auth?: EtcdAuthConfig;
  /** The operator accepts plain http endpoints. */
  insecure?: true;
}

/**
 * `{store: kubernetes}`: in-cluster (the pod's service account), or `kubeconfig: FILE`; `pools: true`
 * for IP pools as IPPool objects (the CRD deploy/crd-ippool.yaml installed; decision 48).
 */
export interface KubeStoreConfig {
  store: 'kubernetes';
  kubeconfig?: string;
  pools?: true;
}

export type ClusterStoreConfig = { store: 'file'; path: string } | EtcdStoreConfig | KubeStoreConfig;

const FILE_KEYS = new Set(['store', 'path']);
const KUBE_KEYS = new Set(['store', 'kubeconfig', 'pools']);
const ETCD_KEYS = new Set(['store', 'endpoints', 'prefix', 'requestTimeoutMs', 'tls', 'auth', 'insecure']);
const TLS_KEYS = new Set(['ca', 'cert', 'key']);
const AUTH_KEYS = new Set(['username', 'passwordFile']);

/** The plain http endpoints of an etcd section (empty for file or all-https): what the agent warns about. */
export function insecureEndpoints(config: ClusterStoreConfig): string[] {
  return config.store === 'etcd' ? config.endpoints.filter((e) => e.startsWith('http://')) : [];
}

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
  if (obj.store === 'kubernetes') {
    for (const k of Object.keys(obj))
      if (!KUBE_KEYS.has(k)) throw bad(`${key}.${k}`, 'unknown key for store: kubernetes');
    if (obj.pools !== undefined && typeof obj.pools !== 'boolean')
      throw bad(`${key}.pools`, 'must be true or false');
    const out: KubeStoreConfig = { store: 'kubernetes' };
    if (obj.pools === true) out.pools = true;
    if (obj.kubeconfig === undefined) return out;
    if (typeof obj.kubeconfig !== 'string' || !isAbsolute(obj.kubeconfig))
      throw bad(`${key}.kubeconfig`, 'must be an absolute path');
    return { ...out, kubeconfig: obj.kubeconfig };
  }
  if (obj.store === 'etcd') {
    for (const k of Object.keys(obj))
      if (!ETCD_KEYS.has(k)) throw bad(`${key}.${k}`, 'unknown key for store: etcd');
    if (!Array.isArray(obj.endpoints) || obj.endpoints.length === 0) {
      throw bad(`${key}.endpoints`, 'must be a non-empty list of https://HOST:PORT');
    }
    if (obj.insecure !== undefined && typeof obj.insecure !== 'boolean')
      throw bad(`${key}.insecure`, 'must be true or false');
    const insecure = obj.insecure === true;
    const endpoints = (obj.endpoints as unknown[]).map((e, i) => {
      if (typeof e !== 'string') throw bad(`${key}.endpoints[${i}]`, 'must be a string');
      let ep: ReturnType<typeof parseEndpoint>;
      try {
        ep = parseEndpoint(e);
      } catch (err) {
        throw new InvalidConfigError(
          `${key}.endpoints[${i}]: ${JSON.stringify(e)}: must be https://HOST:PORT (or http://HOST:PORT with ${key}.insecure: true)`,
          { cause: err },
        );
      }
      if (!ep.secure && !insecure) {
        throw bad(
          `${key}.endpoints[${i}]`,
          `${JSON.stringify(e)} is plain http: whoever reaches etcd or the path to it can read and rewrite node records, leases and pools. Use https:// with ${key}.tls, or set ${key}.insecure: true to accept that`,
        );
      }
      return ep.url;
    });
    const prefix = obj.prefix ?? '/podwire';
    if (typeof prefix !== 'string' || !/^(\/[A-Za-z0-9_.-]+)+$/.test(prefix)) {
      throw bad(`${key}.prefix`, 'must look like /podwire');
    }
    const out: EtcdStoreConfig = { store: 'etcd', endpoints, prefix };
    if (obj.tls !== undefined) {
      if (!endpoints.some((e) => e.startsWith('https://')))
        throw bad(`${key}.tls`, 'given, but no endpoint is https://');
      out.tls = parseTls(obj.tls, `${key}.tls`);
    }
    if (obj.auth !== undefined) out.auth = parseAuth(obj.auth, `${key}.auth`);
    if (insecure) out.insecure = true;
    if (obj.requestTimeoutMs !== undefined) {
      const t = obj.requestTimeoutMs;
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 100 || t > 60_000) {
        throw bad(`${key}.requestTimeoutMs`, 'must be an integer from 100 to 60000');
      }
      out.requestTimeoutMs = t;
    }
    return out;
  }
  throw bad(`${key}.store`, 'must be "file", "etcd" or "kubernetes"');
}

function mapping(value: unknown, key: string, keys: Set<string>, example: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new InvalidConfigError(`${key}: must be a mapping like ${example}`);
  const obj = value as Record<string, unknown>;
  for (const k of Object.keys(obj))
    if (!keys.has(k))
      throw new InvalidConfigError(`${key}.${k}: unknown key (known: ${[...keys].join(', ')})`);
  return obj;
}

function absolutePath(value: unknown, key: string): string {
  if (typeof value !== 'string' || !isAbsolute(value))
    throw new InvalidConfigError(`${key}: must be an absolute path`);
  return value;
}

function parseTls(value: unknown, key: string): EtcdTlsConfig {
  const obj = mapping(value, key, TLS_KEYS, '{ca: FILE, cert: FILE, key: FILE}');
  const out: EtcdTlsConfig = {};
  for (const k of ['ca', 'cert', 'key'] as const) {
    if (obj[k] !== undefined) out[k] = absolutePath(obj[k], `${key}.${k}`);
  }
  if ((out.cert === undefined) !== (out.key === undefined))
    throw new InvalidConfigError(`${key}: cert and key go together (the client certificate and its key)`);
  return out;
}

function parseAuth(value: unknown, key: string): EtcdAuthConfig {
  const obj = mapping(value, key, AUTH_KEYS, '{username: NAME, passwordFile: FILE}');
  if (typeof obj.username !== 'string' || obj.username === '')
    throw new InvalidConfigError(`${key}.username: must be a non-empty string`);
  return { username: obj.username, passwordFile: absolutePath(obj.passwordFile, `${key}.passwordFile`) };
}

async function readConfigFile(path: string, key: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new InvalidConfigError(`${key}: cannot read ${path}: ${why}`, { cause: err });
  }
}

/** The PEMs and the password the section names, read now; errors name the key. */
async function readSecrets(config: EtcdStoreConfig): Promise<{ tls?: EtcdTls; auth?: EtcdAuth }> {
  const out: { tls?: EtcdTls; auth?: EtcdAuth } = {};
  if (config.tls !== undefined) {
    const tls: EtcdTls = {};
    for (const k of ['ca', 'cert', 'key'] as const) {
      const path = config.tls[k];
      if (path !== undefined) tls[k] = await readConfigFile(path, `cluster.tls.${k}`);
    }
    out.tls = tls;
  }
  if (config.auth !== undefined) {
    const file = config.auth.passwordFile;
    // A Secret written with `echo` ends in a newline that is no part of the password.
    const password = (await readConfigFile(file, 'cluster.auth.passwordFile')).replace(/\r?\n$/, '');
    if (password === '') throw new InvalidConfigError(`cluster.auth.passwordFile: ${file} is empty`);
    out.auth = { username: config.auth.username, password };
  }
  return out;
}

/** Extra collaborators and tuning that do not come from the configuration file (tests, the agent). */
export type ClusterStoreExtras = Omit<EtcdStoreOptions, 'endpoints' | 'prefix'> & {
  filePollIntervalMs?: number;
  /** store: kubernetes: this agent's Node (the only one it writes). */
  nodeName?: string;
  /** store: kubernetes: where the watch layer's events go (an invalid Node, a relist, a failure). */
  kubeLog?: KubeLog;
};

/**
 * Opens the configured store. A bad cluster file fails here, and so do an unreadable or invalid TLS
 * file or password file and an etcd that refuses us or that we refuse (certificates, credentials);
 * an unreachable etcd only shows in health().
 */
export async function openClusterStore(
  config: ClusterStoreConfig,
  extras: ClusterStoreExtras = {},
): Promise<ClusterStore> {
  if (config.store === 'file') {
    const opts = extras.filePollIntervalMs === undefined ? {} : { pollIntervalMs: extras.filePollIntervalMs };
    return FileStore.open({ path: config.path, ...opts });
  }
  if (config.store === 'kubernetes') {
    if (extras.nodeName === undefined) throw new InvalidConfigError('cluster.store kubernetes: no node name');
    const connection =
      config.kubeconfig === undefined ? inClusterConnection() : kubeconfigConnection(config.kubeconfig);
    return KubeStore.open({
      connection,
      nodeName: extras.nodeName,
      ...(config.pools ? { pools: true } : {}),
      ...(extras.kubeLog ? { log: extras.kubeLog } : {}),
    });
  }
  const { filePollIntervalMs: _unused, nodeName: _name, kubeLog: _log, ...etcdExtras } = extras;
  const secrets = await readSecrets(config);
  return EtcdStore.open({
    ...etcdExtras,
    endpoints: config.endpoints,
    prefix: config.prefix,
    ...secrets,
    reloadSecrets: () => readSecrets(config),
    ...(config.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: config.requestTimeoutMs }),
  });
}
