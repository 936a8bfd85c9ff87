/**
 * The agent's IPAM: the node's pod CIDRs (NodeLocalAllocator) and, in cluster mode with an etcd store,
 * the cluster's IP pools (PoolAllocator). A pod draws from a pool when its ADD names one; every other
 * pod from the node's CIDRs. Release, lookup and list cover both, so DEL, GC and reconcile need not
 * know where an address came from.
 */
import { InvalidConfigError } from '../../base/errors.js';
import type {
  Allocation,
  NodeLocalAllocator,
  OwnedAllocation,
  RangeUsage,
  UnreadableAllocation,
} from '../../ipam/allocator.js';
import type { PoolAllocator, PoolRequest } from '../../ipam/pool-allocator.js';
import type { AttachmentKey } from '../../ipam/store.js';

export interface AllocateRequest {
  pod?: string;
  pool?: PoolRequest;
  /** The CNI network name, recorded with each claim. */
  network?: string;
}

export class PodIpam {
  readonly node: NodeLocalAllocator;
  /** Undefined when the cluster store keeps no pools (single node, static file). */
  readonly pools: PoolAllocator | undefined;

  constructor(node: NodeLocalAllocator, pools: PoolAllocator | undefined) {
    this.node = node;
    this.pools = pools;
  }

  async allocate(att: AttachmentKey, req: AllocateRequest = {}): Promise<Allocation[]> {
    const meta = {
      ...(req.pod === undefined ? {} : { pod: req.pod }),
      ...(req.network === undefined ? {} : { network: req.network }),
    };
    if (req.pool === undefined) return this.node.allocate(att, meta);
    if (!this.pools)
      throw new InvalidConfigError(
        `${req.pool.poolSource}: IP pools need cluster mode with an etcd store, or store: kubernetes with pools: true (this agent has none)`,
      );
    return [await this.pools.allocate(att, { ...req.pool, ...meta })];
  }

  /** Releases what the attachment holds anywhere; both are tried even if one fails. */
  async release(att: AttachmentKey): Promise<Allocation[]> {
    const [node, pool] = await Promise.allSettled([
      this.node.release(att),
      this.pools?.release(att) ?? Promise.resolve([]),
    ]);
    if (node.status === 'rejected') throw node.reason;
    if (pool.status === 'rejected') throw pool.reason;
    return [...node.value, ...pool.value];
  }

  lookup(att: AttachmentKey): Allocation[] {
    return [...this.node.lookup(att), ...(this.pools?.lookup(att) ?? [])];
  }

  /** What the attachment holds anywhere, with the records (the network each is recorded with). */
  owned(att: AttachmentKey): OwnedAllocation[] {
    return [...this.node.owned(att), ...(this.pools?.owned(att) ?? [])];
  }

  /** Records `network` in the attachment's legacy claims, node and pool; how many changed. */
  async adoptNetwork(att: AttachmentKey, network: string): Promise<number> {
    const node = await this.node.adoptNetwork(att, network);
    const pool = (await this.pools?.adoptNetwork(att, network)) ?? false;
    return node.length + (pool ? 1 : 0);
  }

  /** The node's CIDRs only: a pool is the cluster's (`podwire pool list` shows its use). */
  usage(): RangeUsage[] {
    return this.node.usage();
  }

  /** Every readable claim, node and pool; unreadable ones are in `unreadable` (taken, owner unknown). */
  async list(): Promise<OwnedAllocation[]> {
    return [...(await this.node.list()), ...(this.pools?.list() ?? [])];
  }

  /** Claims the stores could not read, as of their last listing: never handed out, never released. */
  unreadable(): UnreadableAllocation[] {
    return [...this.node.unreadable(), ...(this.pools?.unreadable() ?? [])];
  }
}
