/** `podwire pool create|list|show|delete`: the cluster's IP pools, straight from the cluster store. */
import { loadAgentConfig } from '../agent/config.js';
import { InvalidConfigError } from '../base/errors.js';
import { isPrefix, type Prefix, parseIp, parsePrefix } from '../base/ip.js';
import { openClusterStore } from '../cluster/config.js';
import { type ParsedPool, parseIpPool, poolContains, poolOverlap } from '../cluster/ip-pool.js';
import { nodeAddressesOf } from '../cluster/node-addresses.js';
import type { PoolStore } from '../cluster/pool-store.js';
import type { ClusterStore } from '../cluster/store.js';
import type { CliArgs } from './args.js';
import type { Command } from './commands.js';
import { DEFAULT_CONFIG_PATH } from './control-client.js';
import { table } from './table.js';

const TIMEOUT_MS = 15_000;

async function withPools<T>(
  args: CliArgs,
  fn: (
    pools: PoolStore,
    signal: AbortSignal,
    store: ClusterStore,
    clusterCIDRs: readonly Prefix[],
  ) => Promise<T>,
): Promise<T> {
  const config = loadAgentConfig(args.config ?? DEFAULT_CONFIG_PATH);
  if (!config.cluster) throw new InvalidConfigError('the configuration has no cluster: section');
  // store: kubernetes writes only the agent's own Node; the pool commands write IPPool objects alone
  const store = await openClusterStore(config.cluster.store, { nodeName: config.cluster.nodeName });
  try {
    if (!store.pools)
      throw new InvalidConfigError(
        `${store.description} keeps no IP pools (pools need etcd, or store: kubernetes with pools: true)`,
      );
    return await fn(
      store.pools,
      AbortSignal.timeout(TIMEOUT_MS),
      store,
      (config.cluster.pool?.clusterCIDRs ?? []).map(parsePrefix).filter(isPrefix),
    );
  } finally {
    await store.close();
  }
}

/**
 * Refuses a pool with addresses in a pod CIDR: a registered node's, or one of the clusterCIDRs the
 * nodes' pod CIDRs are cut from (a node that joins later would get it). The error names both.
 */
async function refusePodCIDRs(
  parsed: ParsedPool,
  store: ClusterStore,
  clusterCIDRs: readonly Prefix[],
): Promise<void> {
  const named: Array<{ cidrs: Prefix[]; what: string }> = [];
  for (const { node } of (await store.listNodes()).nodes)
    named.push({ cidrs: node.podCIDRs.map(parsePrefix).filter(isPrefix), what: `of node ${node.name}` });
  named.push({ cidrs: [...clusterCIDRs], what: '(clusterCIDRs, where pod CIDRs are cut from)' });
  for (const { cidrs, what } of named) {
    const hit = poolOverlap(parsed, cidrs);
    if (hit)
      throw new InvalidConfigError(
        `pool ${parsed.pool.name}: range ${hit.range} overlaps the pod CIDR ${hit.cidr.text} ${what}; a pool address must be no pod CIDR's`,
      );
  }
}

function poolFromArgs(name: string, args: CliArgs) {
  const num = (flag: string) => {
    const v = args.values.get(flag);
    return v === undefined ? undefined : Number(v);
  };
  return parseIpPool(
    {
      name,
      ranges: (args.values.get('--ranges') ?? '').split(',').filter((r) => r !== ''),
      subnet: { gateway: args.values.get('--gateway'), prefixLength: num('--prefix-length') },
      ...(args.values.has('--vlan') ? { vlan: num('--vlan') } : {}),
    },
    `pool ${name}`,
  ).pool;
}

async function run(args: CliArgs, out: (s: string) => void): Promise<number> {
  const [verb, name, ...rest] = args.positional;
  const needsName = verb === 'create' || verb === 'show' || verb === 'delete';
  if (
    !verb ||
    !['create', 'list', 'show', 'delete'].includes(verb) ||
    (needsName && !name) ||
    rest.length > 0
  ) {
    out(poolCommand.help);
    return 2;
  }
  const json = (v: unknown) => out(`${JSON.stringify(v, null, 2)}\n`);
  return withPools(args, async (pools, signal, store, clusterCIDRs) => {
    switch (verb) {
      case 'create': {
        const pool = poolFromArgs(name as string, args);
        const parsed = parseIpPool(pool, `pool ${pool.name}`);
        const covered = [...(await nodeAddressesOf(store))].filter(([ip]) => {
          const v = parseIp(ip);
          return v !== undefined && v.family === parsed.family && poolContains(parsed, v.value);
        });
        if (covered.length > 0)
          throw new InvalidConfigError(
            `pool ${pool.name}: its ranges cover node addresses (${covered.map(([ip, node]) => `${ip} of ${node}`).join(', ')}); leave them out`,
          );
        await refusePodCIDRs(parsed, store, clusterCIDRs);
        if (!(await pools.createPool(pool, { signal })))
          throw new InvalidConfigError(`pool ${pool.name} already exists`);
        if (args.json) json(pool);
        else
          out(
            `created pool ${pool.name}: ${pool.ranges.join(', ')} via ${pool.subnet.gateway}/${pool.subnet.prefixLength}${pool.vlan ? `, VLAN ${pool.vlan}` : ''}\n`,
          );
        return 0;
      }
      case 'list': {
        const rows = [];
        for (const pool of await pools.listPools({ signal })) {
          const used = (await pools.claims(pool.name, { signal })).length;
          rows.push({ ...pool, used, size: Number(parseIpPool(pool, pool.name).size) });
        }
        if (args.json) json(rows);
        else
          out(
            table(
              ['NAME', 'RANGES', 'SUBNET', 'VLAN', 'USED', 'SIZE'],
              rows.map((p) => [
                p.name,
                p.ranges.join(','),
                `${p.subnet.gateway}/${p.subnet.prefixLength}`,
                p.vlan === 0 ? '-' : String(p.vlan),
                String(p.used),
                String(p.size),
              ]),
            ),
          );
        return 0;
      }
      case 'show': {
        const pool = await pools.getPool(name as string, { signal });
        if (!pool) throw new InvalidConfigError(`no pool ${name}`);
        const claims = await pools.claims(pool.name, { signal });
        if (args.json) json({ ...pool, claims });
        else
          out(
            `pool ${pool.name}: ${pool.ranges.join(', ')} via ${pool.subnet.gateway}/${pool.subnet.prefixLength}, VLAN ${pool.vlan || 'none'}, ${claims.length} of ${parseIpPool(pool, pool.name).size} in use\n${table(
              ['IP', 'NODE', 'POD', 'CONTAINER', 'IFACE', 'SINCE'],
              claims.map((c) => [
                c.ip,
                c.owner.node,
                c.owner.pod ?? '-',
                c.owner.containerId.slice(0, 12),
                c.owner.ifname,
                c.owner.createdAt,
              ]),
            )}`,
          );
        return 0;
      }
      default: {
        const deleted = await pools.deletePool(name as string, { signal });
        if (!deleted) throw new InvalidConfigError(`no pool ${name}`);
        out(args.json ? `${JSON.stringify({ deleted: name })}\n` : `deleted pool ${name}\n`);
        return 0;
      }
    }
  });
}

export const poolCommand: Command = {
  summary: 'IP pools for pods on the underlay subnet: create, list (with usage), show, delete',
  help: `usage: podwire pool create NAME --ranges R[,R...] --gateway IP --prefix-length N [--vlan V]
       podwire pool list | show NAME | delete NAME

IP pools live in the cluster store: etcd, or with store: kubernetes and pools: true the IPPool
objects of podwire's custom resource (deploy/crd-ippool.yaml; their status names each address's
holder). A range is a CIDR or START-END; the subnet's network,
gateway and broadcast are never handed out. VLAN 0 (the default) is untagged. A pod draws from a pool
when its CNI_ARGS say PODWIRE_POOL=NAME or its namespace is mapped in the agent's poolByNamespace;
IP=ADDR in CNI_ARGS (or runtimeConfig.ips) asks for a fixed address of the pool. A pool with
addresses in use cannot be deleted.

options:
  --config FILE   the agent configuration that names the cluster store; default ${DEFAULT_CONFIG_PATH}
  --json          machine-readable output
`,
  run,
};
