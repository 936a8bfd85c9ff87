/**
 * This node's membership of the cluster: its pod CIDRs (leased from the store, remembered locally so
 * that a restart without the store keeps serving), its node record, and the watch that keeps the
 * overlay's routes to its peers equal to the store's list of nodes.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidConfigError } from '../../base/errors.js';
import { registerNode } from '../../cluster/register.js';
import type { ClusterStore, NodeRecord, PodCIDRPool, StoreHealth } from '../../cluster/store.js';
import type { Overlay, OverlayStatus } from '../../datapath/overlay/overlay.js';
import type { Logger } from '../log.js';

export interface ClusterNodeOptions {
  store: ClusterStore;
  nodeName: string;
  underlayIP: string;
  stateDir: string;
  log: Logger;
  /** Told the peers at each change, before the overlay is (the egress masquerade's kept set). */
  onPeers?: (peers: readonly NodeRecord[]) => Promise<void>;
}

interface LeaseCache {
  nodeName: string;
  podCIDRs: string[];
}

const BACKOFF_MAX_MS = 5000;

/** Where the last known lease is kept: `<stateDir>/node-lease.json`. */
function cachePath(stateDir: string): string {
  return join(stateDir, 'node-lease.json');
}

function readCache(stateDir: string, nodeName: string): string[] | undefined {
  try {
    const c = JSON.parse(readFileSync(cachePath(stateDir), 'utf8')) as LeaseCache;
    return c.nodeName === nodeName && Array.isArray(c.podCIDRs) ? c.podCIDRs : undefined;
  } catch {
    return undefined; // no cache yet (first start) or unreadable: the store must answer
  }
}

function writeCache(stateDir: string, cache: LeaseCache): void {
  mkdirSync(stateDir, { recursive: true });
  const path = cachePath(stateDir);
  writeFileSync(`${path}.tmp`, JSON.stringify(cache));
  renameSync(`${path}.tmp`, path);
}

/**
 * The node's pod CIDRs: `configured` when given, else leased from the store. When the store cannot
 * answer within `waitMs`, the lease remembered from an earlier start is used, so a node whose CIDR
 * is known keeps serving ADD through a store outage.
 */
export async function resolvePodCIDRs(
  o: ClusterNodeOptions,
  pool: PodCIDRPool | undefined,
  configured: string[] | undefined,
  waitMs: number,
): Promise<string[]> {
  if (configured && configured.length > 0) return configured;
  const deadline = Date.now() + waitMs;
  for (let delay = 200; ; delay = Math.min(delay * 2, BACKOFF_MAX_MS)) {
    let cidrs: string[];
    try {
      const signal = AbortSignal.timeout(waitMs);
      cidrs = pool
        ? await o.store.leasePodCIDRs(o.nodeName, pool, { signal })
        : await recordedCIDRs(o.store, o.nodeName, signal);
    } catch (err) {
      const cached = readCache(o.stateDir, o.nodeName);
      if (cached) {
        o.log.warn('cluster store unreachable: using the remembered pod CIDRs', {
          podCIDRs: cached,
          err: String(err),
        });
        return cached;
      }
      if (Date.now() + delay > deadline) throw err;
      o.log.warn('cluster store unreachable, retrying', { err: String(err), retryMs: delay });
      await sleep(delay);
      continue;
    }
    writeCache(o.stateDir, { nodeName: o.nodeName, podCIDRs: cidrs });
    return cidrs;
  }
}

/** Without a pool to lease from, the node's CIDRs are the ones its record (e.g. the static file) gives. */
async function recordedCIDRs(store: ClusterStore, nodeName: string, signal: AbortSignal): Promise<string[]> {
  const stored = await store.getNode(nodeName, { signal });
  if (!stored || stored.node.podCIDRs.length === 0) {
    throw new InvalidConfigError(
      `agent config: node ${nodeName} has no podCIDRs in ${store.description}, and neither podCIDRs nor clusterCIDRs is configured`,
    );
  }
  return stored.node.podCIDRs;
}

export class ClusterNode {
  readonly #o: ClusterNodeOptions;
  readonly #overlay: Overlay;
  readonly #record: NodeRecord;
  readonly #abort = new AbortController();
  /** Peers by name, as last seen in the store (never this node). */
  readonly #peers = new Map<string, NodeRecord>();
  #status: OverlayStatus = { peers: [], skipped: [] };
  #registered = false;
  #loop: Promise<void> = Promise.resolve();

  constructor(o: ClusterNodeOptions, overlay: Overlay, record: NodeRecord) {
    this.#o = o;
    this.#overlay = overlay;
    this.#record = record;
  }

  /** Registers the node record and follows the store, in the background, until `stop`. */
  start(): void {
    this.#loop = this.#run();
  }

  get record(): NodeRecord {
    return this.#record;
  }

  /** The peers as last seen in the store (never this node), by name. */
  get peers(): NodeRecord[] {
    return [...this.#peers.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  status(): {
    store: string;
    health: StoreHealth;
    registered: boolean;
    mode: string;
    overlay: OverlayStatus;
  } {
    return {
      store: this.#o.store.description,
      health: this.#o.store.health(),
      registered: this.#registered,
      mode: this.#overlay.mode,
      overlay: this.#status,
    };
  }

  async #run(): Promise<void> {
    const { log } = this.#o;
    const signal = this.#abort.signal;
    for (let delay = 200; !signal.aborted; delay = Math.min(delay * 2, BACKOFF_MAX_MS)) {
      try {
        if (!this.#registered) {
          await registerNode(this.#o.store, this.#record, { signal });
          this.#registered = true;
          log.info('node registered', { node: this.#record });
        }
        // List, converge to exactly that list, then follow changes from its revision: a node deleted
        // while this agent was not watching disappears here too.
        const list = await this.#o.store.listNodes({ signal });
        this.#peers.clear();
        for (const { node } of list.nodes)
          if (node.name !== this.#record.name) this.#peers.set(node.name, node);
        await this.#apply();
        for await (const ev of this.#o.store.watchNodes({ signal, since: list })) {
          delay = 200;
          if (ev.node.name === this.#record.name) continue;
          if (ev.type === 'put') this.#peers.set(ev.node.name, ev.node);
          else this.#peers.delete(ev.node.name);
          await this.#apply();
        }
      } catch (err) {
        if (signal.aborted) return;
        log.warn('cluster store trouble; existing routes stay', { err: String(err), retryMs: delay });
      }
      try {
        await sleep(delay, undefined, { signal });
      } catch {
        return;
      }
    }
  }

  async #apply(): Promise<void> {
    const before = this.#status.peers.join(',');
    // The listener first: a new peer's CIDR is kept from masquerade before a route leads there.
    await this.#o.onPeers?.([...this.#peers.values()]);
    this.#status = await this.#overlay.setPeers([...this.#peers.values()]);
    if (this.#status.peers.join(',') !== before || this.#status.skipped.length > 0) {
      this.#o.log.info('peers programmed', { peers: this.#status.peers, skipped: this.#status.skipped });
    }
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
    await this.#overlay.stop();
  }
}
