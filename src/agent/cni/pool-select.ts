/**
 * Which pool an ADD draws from, and which fixed address it asks for:
 * - the pool: `PODWIRE_POOL` in CNI_ARGS, else the agent's `poolByNamespace` entry for
 *   K8S_POD_NAMESPACE, else none (the node's pod CIDRs);
 * - a fixed address: `IP` in CNI_ARGS, or `runtimeConfig.ips` (the "ips" capability), one address,
 *   with or without a prefix length. A fixed address without a pool is refused: it would have to be
 *   inside the node's CIDR, and podwire does not hand out node-CIDR addresses by request.
 */

import { isDnsLabel } from '../../base/dns-label.js';
import { InvalidConfigError, type PodwireError } from '../../base/errors.js';
import { parseIp } from '../../base/ip.js';
import type { NetConf } from '../../cni/types.js';
import type { PoolRequest } from '../../ipam/pool-allocator.js';
import type { AgentConfig } from '../config.js';

function bad(field: string, why: string): PodwireError {
  return new InvalidConfigError(`${field}: ${why}`);
}

function fixedAddress(text: string, field: string): string {
  const addr = text.includes('/') ? (text.split('/')[0] as string) : text;
  if (parseIp(addr) === undefined) throw bad(field, `${JSON.stringify(text)} is not an IP address`);
  return addr;
}

function requestedIp(
  args: ReadonlyMap<string, string>,
  conf: NetConf,
): { value: string; source: string } | undefined {
  const arg = args.get('IP');
  const ips = conf.runtimeConfig?.ips;
  if (arg !== undefined && arg !== '')
    return { value: fixedAddress(arg, 'CNI_ARGS IP'), source: 'CNI_ARGS IP' };
  if (ips === undefined) return undefined;
  if (!Array.isArray(ips) || ips.some((x) => typeof x !== 'string'))
    throw bad('runtimeConfig.ips', 'must be a list of addresses');
  if (ips.length === 0) return undefined;
  if (ips.length > 1) throw bad('runtimeConfig.ips', `asks for ${ips.length} addresses; a pool gives one`);
  return { value: fixedAddress(ips[0] as string, 'runtimeConfig.ips[0]'), source: 'runtimeConfig.ips[0]' };
}

export function poolRequest(
  args: ReadonlyMap<string, string>,
  conf: NetConf,
  config: AgentConfig,
): PoolRequest | undefined {
  const ip = requestedIp(args, conf);
  let pool: string | undefined;
  let poolSource = '';
  const named = args.get('PODWIRE_POOL');
  if (named !== undefined && named !== '') {
    if (!isDnsLabel(named)) throw bad('CNI_ARGS PODWIRE_POOL', `${JSON.stringify(named)} is not a pool name`);
    pool = named;
    poolSource = 'CNI_ARGS PODWIRE_POOL';
  } else {
    const ns = args.get('K8S_POD_NAMESPACE');
    const mapped = ns === undefined ? undefined : config.cluster?.poolByNamespace.get(ns);
    if (mapped !== undefined) {
      pool = mapped;
      poolSource = `agent config poolByNamespace.${ns}`;
    }
  }
  if (pool === undefined) {
    if (ip)
      throw bad(
        ip.source,
        `a fixed address (${ip.value}) needs a pool: set PODWIRE_POOL in CNI_ARGS or map the namespace in poolByNamespace`,
      );
    return undefined;
  }
  return ip ? { pool, poolSource, ip } : { pool, poolSource };
}
