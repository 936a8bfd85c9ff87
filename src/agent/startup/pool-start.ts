/**
 * Pools at agent start: the node's durable record of its pool addresses (stateDir/pool-ipam), the
 * allocator over the cluster store's pools, and the sync of the two (I4: a restart neither loses nor
 * duplicates a pool address). A store that keeps no pools (the static file, a single node) means none.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidConfigError } from '../../base/errors.js';
import { isPrefix, parsePrefix } from '../../base/ip.js';
import { parseIpPool, poolOverlap } from '../../cluster/ip-pool.js';
import { nodeAddressesOf } from '../../cluster/node-addresses.js';
import type { PoolStore } from '../../cluster/pool-store.js';
import type { ClusterStore } from '../../cluster/store.js';
import { FileStore } from '../../ipam/file-store.js';
import { PoolAllocator } from '../../ipam/pool-allocator.js';
import type { IpamStore } from '../../ipam/store.js';
import type { Logger } from '../log.js';
import type { UndoStack } from '../undo-stack.js';

/** The range id a FileStore directory stands for (the inverse of rangeDirName: '_' '/', '-' ':', %XX). */
export function rangeIdOfDir(name: string): string | undefined {
  if (name.startsWith('.')) return undefined;
  try {
    return decodeURIComponent(name.replaceAll('_', '/').replaceAll('-', ':'));
  } catch {
    return undefined; // not a name rangeDirName makes: not a range
  }
}

/**
 * A pool (made before `podwire pool create` checked, or by another tool, or before this node got its
 * CIDR) with addresses in this node's pod CIDRs: the agent does not start, naming both. A store that
 * does not answer is no reason not to start (pool ADDs fail until it is back); the next start checks.
 */
async function refuseOverlaps(pools: PoolStore, podCIDRs: readonly string[], log: Logger): Promise<void> {
  const cidrs = podCIDRs.map(parsePrefix).filter(isPrefix);
  let stored: Awaited<ReturnType<PoolStore['listPools']>>;
  try {
    stored = await pools.listPools();
  } catch (err) {
    log.warn("pools not checked against this node's pod CIDRs at start", { err: String(err) });
    return;
  }
  for (const value of stored) {
    let parsed: ReturnType<typeof parseIpPool>;
    try {
      parsed = parseIpPool(value, `pool ${value.name}`);
    } catch {
      continue; // a pool the store holds malformed: ADDs from it fail with its error
    }
    const hit = poolOverlap(parsed, cidrs);
    if (hit)
      throw new InvalidConfigError(
        `pool ${value.name}: range ${hit.range} overlaps this node's pod CIDR ${hit.cidr.text}; a pool address must be no pod CIDR's: delete the pool (podwire pool delete ${value.name}) or give the node another CIDR`,
      );
  }
}

export async function startPools(
  pools: PoolStore | undefined,
  node: string,
  stateDir: string,
  log: Logger,
  undo: UndoStack,
  /** A test seam (AgentSeams.wrapIpamStore). */
  wrapLocal?: (store: IpamStore) => IpamStore,
  /** The cluster's node records, whose addresses no pod may take (issue 15, finding 3). */
  nodes?: ClusterStore,
  /** This node's pod CIDRs: a pool with addresses in one makes the agent refuse to start. */
  podCIDRs: readonly string[] = [],
): Promise<PoolAllocator | undefined> {
  if (!pools) return undefined;
  await refuseOverlaps(pools, podCIDRs, log);
  const dir = join(stateDir, 'pool-ipam');
  const opened = await FileStore.open(dir);
  const local = wrapLocal ? wrapLocal(opened) : opened;
  undo.push('pool IPAM store', () => local.close());
  const entries = await readdir(dir, { withFileTypes: true });
  const localRanges = entries
    .filter((e) => e.isDirectory())
    .map((e) => rangeIdOfDir(e.name))
    .filter((r) => r !== undefined);
  const nodeAddresses = nodes && (() => nodeAddressesOf(nodes));
  const allocator = await PoolAllocator.open({
    pools,
    local,
    localRanges,
    node,
    ...(nodeAddresses ? { nodeAddresses } : {}),
  });
  for (const c of allocator.unreadable()) {
    log.warn(
      'unreadable pool address record: the address stays taken, its owner is unknown; remove the file once no pod uses it',
      {
        range: c.rangeId,
        ip: c.ip,
        file: c.where,
        reason: c.reason,
      },
    );
  }
  try {
    const sync = await allocator.syncWithStore();
    if (sync.conflicts.length > 0)
      log.error('pool addresses recorded here are held by another node', { conflicts: sync.conflicts });
    log.info('pools synced with the store', sync);
  } catch (err) {
    // The store may be down at start: ADD from pools fails until it is back; DEL retries are the runtime's.
    log.warn('pools not synced with the store at start', { err: String(err) });
  }
  return allocator;
}
