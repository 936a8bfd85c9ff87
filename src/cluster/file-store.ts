/**
 * The static file store (format: src/cluster/file-format.ts). The file is the single source of
 * truth and people edit it; the store therefore is read-only: `putNode`, `deleteNode` and
 * `releasePodCIDRs` fail with ERR_STORE telling the caller to edit the file (`registerNode` in
 * register.ts writes nothing when the file already says what the agent would publish). A pod CIDR
 * "lease" returns the CIDRs the file gives the node.
 *
 * Watch: the file is re-read when its directory reports a change (fs.watch; editors replace files
 * by rename, so the directory is watched, not the file) and every `pollIntervalMs` as a fallback for
 * file systems where fs.watch is silent. A file that turns bad keeps the last good nodes in force
 * and shows in `health()`; it is never half-applied.
 *
 * Revisions are a generation number that grows by one on every reload that changes something; a
 * node's version is the generation in which its record last changed. History is not kept, so a
 * watch always starts from a difference against `since.nodes`.
 */
import { type FSWatcher, watch as fsWatch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { PodwireError } from '../base/errors.js';
import { isPrefix, parsePrefix, prefixContains } from '../base/ip.js';
import { EventQueue } from './event-queue.js';
import { parseClusterFile } from './file-format.js';
import { HealthState } from './health.js';
import { byName, checkNodeName, diffNodes, nodesEqual } from './node-record.js';
import { parsePool } from './pool.js';
import {
  type ClusterStore,
  type NodeEvent,
  type NodeList,
  type NodeRecord,
  type OpOptions,
  type PodCIDRPool,
  type Precondition,
  type PutResult,
  type StoredNode,
  type StoreHealth,
  storeError,
  type WatchOptions,
} from './store.js';

export interface FileStoreOptions {
  path: string;
  /** Fallback re-read interval; default 1000 ms. */
  pollIntervalMs?: number;
}

export class FileStore implements ClusterStore {
  readonly description: string;
  readonly writable = false;
  readonly #path: string;
  /** Invariant: holds exactly the nodes of the last good read of the file. */
  #nodes = new Map<string, StoredNode>();
  #generation = 0;
  #lastText: string | undefined;
  readonly #health = new HealthState(true);
  readonly #watchers = new Set<EventQueue<NodeEvent>>();
  #fsWatcher: FSWatcher | undefined;
  #poll: NodeJS.Timeout | undefined;
  #reloading: Promise<void> | undefined;
  #reloadAgain = false;
  #closed = false;

  private constructor(path: string) {
    this.#path = path;
    this.description = `file ${path}`;
  }

  /** Reads and validates the file (ERR_STORE naming the key when it is bad), then starts watching it. */
  static async open(opts: FileStoreOptions): Promise<FileStore> {
    const store = new FileStore(opts.path);
    await store.#reload(true);
    store.#startWatching(opts.pollIntervalMs ?? 1000);
    return store;
  }

  async getNode(name: string, _opts?: OpOptions): Promise<StoredNode | undefined> {
    this.#checkOpen('getNode');
    return this.#nodes.get(checkNodeName(name, `${this.description}: getNode`));
  }

  async listNodes(_opts?: OpOptions): Promise<NodeList> {
    this.#checkOpen('listNodes');
    return { revision: String(this.#generation), nodes: [...this.#nodes.values()].sort(byName) };
  }

  async putNode(node: NodeRecord, _precondition: Precondition, _opts?: OpOptions): Promise<PutResult> {
    this.#checkOpen('putNode');
    throw this.#readOnly(`putNode ${node?.name}`);
  }

  async deleteNode(name: string, _opts?: OpOptions): Promise<boolean> {
    this.#checkOpen('deleteNode');
    throw this.#readOnly(`deleteNode ${name}`);
  }

  async releasePodCIDRs(nodeName: string, _opts?: OpOptions): Promise<string[]> {
    this.#checkOpen('releasePodCIDRs');
    throw this.#readOnly(`releasePodCIDRs ${nodeName}`);
  }

  /**
   * The node's CIDRs from the file, one per family of the pool, each inside the pool's cluster CIDRs
   * (mask size is the file's business). Fails naming the node when the file gives it none.
   */
  async leasePodCIDRs(nodeName: string, pool: PodCIDRPool, _opts?: OpOptions): Promise<string[]> {
    this.#checkOpen('leasePodCIDRs');
    const parsed = parsePool(pool.clusterCIDRs, pool.nodeCIDRMaskSize);
    const stored = this.#nodes.get(checkNodeName(nodeName, `${this.description}: leasePodCIDRs`));
    const where = `${this.description}: leasePodCIDRs`;
    if (stored === undefined) throw storeError(`${where}: node ${nodeName} is not in the file`);
    const out: string[] = [];
    for (const family of parsed.families) {
      const cidr = stored.node.podCIDRs
        .map(parsePrefix)
        .filter(isPrefix)
        .find((p) => p.family === family.family);
      if (cidr === undefined) {
        throw storeError(
          `${where}: node ${nodeName} has no IPv${family.family} pod CIDR (podCIDRs) in the file`,
        );
      }
      if (!family.clusterCIDRs.some((c) => prefixContains(c, cidr))) {
        const cluster = family.clusterCIDRs.map((c) => c.text).join(', ');
        throw storeError(
          `${where}: node ${nodeName}'s pod CIDR ${cidr.text} is outside clusterCIDRs ${cluster}`,
        );
      }
      out.push(cidr.text);
    }
    return out;
  }

  async *watchNodes(opts: WatchOptions): AsyncGenerator<NodeEvent, void, undefined> {
    this.#checkOpen('watchNodes');
    const queue = new EventQueue<NodeEvent>();
    // Synchronous from here to `add`: no reload can slip between the catch-up diff and the subscription.
    const known = new Map((opts.since?.nodes ?? []).map((s) => [s.node.name, s] as const));
    queue.push(...diffNodes(known, [...this.#nodes.values()].sort(byName), String(this.#generation)));
    this.#watchers.add(queue);
    try {
      yield* queue.drain(opts.signal);
    } finally {
      this.#watchers.delete(queue);
    }
  }

  health(): StoreHealth {
    return this.#health.snapshot();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#fsWatcher?.close();
    clearInterval(this.#poll);
    for (const q of this.#watchers) q.end();
    this.#watchers.clear();
    await this.#reloading;
  }

  #checkOpen(op: string): void {
    if (this.#closed) throw storeError(`${this.description}: ${op}: store is closed`);
  }

  #readOnly(what: string): Error {
    return storeError(
      `${this.description}: ${what}: the file store is read-only; edit ${this.#path} instead`,
    );
  }

  #startWatching(pollIntervalMs: number): void {
    const name = basename(this.#path);
    try {
      this.#fsWatcher = fsWatch(dirname(this.#path), { persistent: false }, (_event, file) => {
        if (file === null || file === name) this.#requestReload();
      });
      this.#fsWatcher.on('error', (err) =>
        this.#health.markDown(`${this.description}: watch: ${err.message}`),
      );
    } catch (err) {
      // Polling still sees changes; the health view says why they arrive late.
      this.#health.markDown(
        `${this.description}: fs.watch: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    this.#poll = setInterval(() => this.#requestReload(), pollIntervalMs);
    this.#poll.unref();
  }

  /** Coalesces reload requests: at most one read runs, and one more follows if asked meanwhile. */
  #requestReload(): void {
    if (this.#closed) return;
    if (this.#reloading !== undefined) {
      this.#reloadAgain = true;
      return;
    }
    this.#reloading = this.#reload(false).finally(() => {
      this.#reloading = undefined;
      if (this.#reloadAgain) {
        this.#reloadAgain = false;
        this.#requestReload();
      }
    });
  }

  /** Reads the file; on `initial` a bad file throws, afterwards it only marks health down. */
  async #reload(initial: boolean): Promise<void> {
    let text: string;
    let nodes: NodeRecord[];
    try {
      text = await readFile(this.#path, 'utf8');
      if (text === this.#lastText) {
        this.#health.markOk();
        return;
      }
      nodes = parseClusterFile(text, this.#path);
    } catch (err) {
      const e =
        err instanceof PodwireError
          ? err
          : storeError(`${this.description}: cannot read: ${errText(err)}`, err);
      if (initial) throw e;
      this.#health.markDown(e.message);
      return;
    }
    if (this.#closed) return;
    this.#lastText = text;
    this.#health.markOk();
    this.#apply(nodes);
  }

  /** Installs a good read: versions move only for records that changed. */
  #apply(nodes: NodeRecord[]): void {
    const generation = this.#generation + 1;
    const next: StoredNode[] = nodes.map((node) => {
      const before = this.#nodes.get(node.name);
      return before !== undefined && nodesEqual(before.node, node)
        ? before
        : { node, version: String(generation) };
    });
    const changed = next.length !== this.#nodes.size || next.some((s) => this.#nodes.get(s.node.name) !== s);
    if (!changed) return;
    this.#generation = generation;
    const events = diffNodes(this.#nodes, next.sort(byName), String(generation));
    for (const q of this.#watchers) q.push(...events);
  }
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

FileStore satisfies { open(opts: FileStoreOptions): Promise<ClusterStore> };
