/**
 * The cluster keys of the agent configuration:
 *
 *   cluster: {store: etcd, endpoints: [https://10.0.0.1:2379], prefix: /podwire, tls: {ca, cert, key}}
 *                                                             # or {store: file, path: ...}; see cluster/config.ts
 *   clusterCIDRs: ["10.244.0.0/16", "fd00:10:244::/56"]     # node CIDRs are leased from these ...
 *   nodeCIDRMaskSize: {ipv4: 24, ipv6: 64}
 *   nodeName: node-1                                          # default: the host name
 *   uplink: eth0                                              # its address is the node's underlay IP
 *   trafficMode: encap                                        # encap (VXLAN) | noEncap (plain routes)
 *   poolByNamespace: {web: blue}                              # pods of namespace web draw from IP pool blue
 *
 * `podCIDRs`, when also given, wins over leasing (the node's CIDRs are fixed by configuration).
 */
import { hostname } from 'node:os';
import { isDnsLabel, isDnsSubdomain } from '../base/dns-label.js';
import { errorWithCode, InvalidConfigError, PodwireError } from '../base/errors.js';
import { type ClusterStoreConfig, parseClusterStoreConfig } from '../cluster/config.js';
import { parsePodCIDRPool } from '../cluster/pool.js';
import type { PodCIDRPool } from '../cluster/store.js';

export interface ClusterSettings {
  store: ClusterStoreConfig;
  /** Absent when the node's CIDRs come from `podCIDRs` or from the static file. */
  pool: PodCIDRPool | undefined;
  nodeName: string;
  uplink: string;
  trafficMode: 'encap' | 'noEncap';
  /** Kubernetes namespace -> IP pool name, for pods whose CNI_ARGS name no pool. */
  /** A Map, not an object: a namespace may be named `constructor` or `__proto__`. */
  poolByNamespace: ReadonlyMap<string, string>;
}

export const CLUSTER_KEYS = [
  'cluster',
  'clusterCIDRs',
  'nodeCIDRMaskSize',
  'nodeName',
  'uplink',
  'trafficMode',
  'poolByNamespace',
] as const;

const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

function bad(key: string, why: string): PodwireError {
  return new InvalidConfigError(`agent config: ${key}: ${why}`);
}

/** Undefined when no cluster key is set (a single node); else every key checked, errors naming it. */
export function parseClusterSettings(obj: Record<string, unknown>): ClusterSettings | undefined {
  if (obj.cluster === undefined) {
    for (const k of CLUSTER_KEYS) if (obj[k] !== undefined) throw bad(k, 'needs a cluster: section');
    return undefined;
  }
  let store: ClusterStoreConfig;
  let pool: PodCIDRPool | undefined;
  try {
    store = parseClusterStoreConfig(obj.cluster);
    if (obj.clusterCIDRs !== undefined || obj.nodeCIDRMaskSize !== undefined) {
      pool = parsePodCIDRPool(obj.clusterCIDRs, obj.nodeCIDRMaskSize);
    }
  } catch (err) {
    if (err instanceof PodwireError)
      throw errorWithCode(err.code, `agent config: ${err.message}`, { cause: err });
    throw err;
  }
  const nodeName = obj.nodeName ?? hostname().toLowerCase();
  if (!isDnsSubdomain(nodeName)) {
    throw bad('nodeName', `${JSON.stringify(nodeName)} is not a valid node name (DNS-1123 subdomain)`);
  }
  const uplink = obj.uplink;
  if (typeof uplink !== 'string' || !IFNAME.test(uplink))
    throw bad('uplink', 'required: the interface whose address is the underlay IP');
  const trafficMode = obj.trafficMode ?? 'encap';
  if (trafficMode !== 'encap' && trafficMode !== 'noEncap')
    throw bad('trafficMode', `${JSON.stringify(trafficMode)} is not one of encap, noEncap`);
  const poolByNamespace = new Map<string, string>();
  const map = obj.poolByNamespace ?? {};
  if (map === null || typeof map !== 'object' || Array.isArray(map))
    throw bad('poolByNamespace', 'must be a mapping of namespace to pool name');
  for (const [ns, name] of Object.entries(map)) {
    if (!isDnsLabel(name))
      throw bad(`poolByNamespace.${ns}`, `${JSON.stringify(name)} is not a pool name (a DNS-1123 label)`);
    poolByNamespace.set(ns, name);
  }
  return { store, pool, nodeName, uplink, trafficMode, poolByNamespace };
}
