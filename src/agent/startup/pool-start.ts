/**
 * Pools at agent start: the node's durable record of its pool addresses (stateDir/pool-ipam), the
 * allocator over the cluster store's pools, and the sync of the two (I4: a restart neither loses nor
 * duplicates a pool address). A store that keeps no pools (the static file, a single node) means none.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
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
): Promise<PoolAllocator | undefined> {
  if (!pools) return undefined;
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
