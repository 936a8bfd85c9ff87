/**
 * This node's membership of the cluster: its pod CIDRs (leased from the store, remembered locally so
 * that a restart without the store keeps serving, and checked with the store once it answers), its
 * node record, and the watch that keeps the overlay's routes to its peers equal to the store's list
 * of nodes.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate as setImmediatePromise, setTimeout as sleep } from 'node:timers/promises';
import { InvalidConfigError } from '../../base/errors.js';
import { registerNode } from '../../cluster/register.js';
import {
  type ClusterStore,
  type NodeRecord,
  type PodCIDRPool,
  type StoreHealth,
  storeFailure,
} from '../../cluster/store.js';
import type { Overlay, OverlayStatus } from '../../datapath/overlay/overlay.js';
import type { Logger } from '../log.js';
import { type AcceptedChanges, PeerCheck } from './peer-check.js';

export interface ClusterNodeOptions {
  store: ClusterStore;
  nodeName: string;
  underlayIP: string;
  stateDir: string;
  log: Logger;
  /** Told the peers at each change, before the overlay is (the egress masquerade's kept set). */
  onPeers?: (peers: readonly NodeRecord[]) => Promise<void>;
  /** The cluster CIDRs when the node leases from them: every peer's pod CIDRs must lie inside. */
  clusterCIDRs?: readonly string[];
  /** How often the peers are converged in full as a safety net; default 5 minutes. */
  resyncMs?: number;
  /** Bench only (PODWIRE_BENCH_LEGACY_PEERS=1): every event converges all peers, as before issue 17. */
  legacyPeerProgramming?: boolean;
  /**
   * The node runs with the pod CIDRs remembered in node-lease.json (the store did not answer at
   * start): the membership asks the store for this node's lease (from `pool`, or its record without
   * one) before it registers the node, and the node serves no ADD if the store says otherwise.
   */
  remembered?: { pool: PodCIDRPool | undefined };
}

/**
 * Whether the store stands behind the pod CIDRs the node runs with:
 * - `leased`: the store gave them at start (or the configuration fixes them: nothing to check);
 * - `remembered`: taken from node-lease.json at start because the store did not answer; ADD is
 *   served from them meanwhile (an outage must not stop a node whose CIDR is known);
 * - `confirmed`: remembered, and the store has since said this node holds them;
 * - `not-held`: the store has said this node does not hold them (they went to another node while it
 *   was away, or it holds other CIDRs now), or refused the lease: the node hands out no address
 *   from them (ADD refused, STATUS and /readyz failing) until it is restarted.
 */
export type LeaseState =
  | { state: 'leased' | 'confirmed' }
  | { state: 'remembered'; since: Date }
  | { state: 'not-held'; reason: string; since: Date };

interface LeaseCache {
  nodeName: string;
  podCIDRs: string[];
}

const BACKOFF_MAX_MS = 5000;
const RESYNC_MS = 5 * 60_000;
/** Records checked at once; a batch of changes larger than this is checked in slices. */
const DELTA_SLICE = 128;
/**
 * Peers handed to the overlay at once: a CNI call that arrives during a slice waits for it to end.
 * Measured with 5000 peers joining (bench/cluster-scale.ts, quiet machine, bench/README.md "Run F"):
 * 128 peers a slice held the event loop 10 ms at the median (p90 25 ms) and ADDs during the join
 * took 1.27-1.74 x their idle p50; 64 peers, 5.5 ms (p90 11 ms), 1.00-1.18 x, the join 1.7 -> 2.4 s;
 * 32 peers, 1.0 x but 4.1 s. Sizing slices to a time budget (halve above 6 ms, double below 3)
 * settled at 32 and took 4.1 s too.
 */
const PEER_SLICE = 64;
/** Watch events taken in one turn of the event loop at most. */
const WATCH_YIELD_EVERY = 32;
/** The longest a slice of peer programming waits for CNI calls in flight to finish. */
const CNI_FIRST_MAX_MS = 25;
/** How often the programming loop looks at the store's health (a reconnect calls for a full converge). */
const HEALTH_POLL_MS = 1000;

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

function removeCache(stateDir: string): void {
  rmSync(cachePath(stateDir), { force: true });
}

/** The node's pod CIDRs at start, and whether they are the store's answer or the remembered one. */
export interface ResolvedPodCIDRs {
  podCIDRs: string[];
  /** Taken from node-lease.json because the store did not answer: the store has yet to confirm them. */
  remembered: boolean;
}

/**
 * The node's pod CIDRs: `configured` when given, else leased from the store. When the store cannot
 * answer (unreachable, or no answer within `waitMs`), the lease remembered from an earlier start is
 * used, so a node whose CIDR is known keeps serving ADD through a store outage; the membership checks
 * it with the store once the store answers (`LeaseState`). An answer from the store that refuses (the
 * lease no longer fits the pool, the node is not in the file, credentials refused) is never masked by
 * the remembered lease: it stops the start.
 */
export async function resolvePodCIDRs(
  o: ClusterNodeOptions,
  pool: PodCIDRPool | undefined,
  configured: string[] | undefined,
  waitMs: number,
): Promise<ResolvedPodCIDRs> {
  if (configured && configured.length > 0) return { podCIDRs: configured, remembered: false };
  const deadline = Date.now() + waitMs;
  for (let delay = 200; ; delay = Math.min(delay * 2, BACKOFF_MAX_MS)) {
    let cidrs: string[];
    const signal = AbortSignal.timeout(waitMs);
    try {
      cidrs = await askStore(o, pool, signal);
    } catch (err) {
      // Only the lack of an answer (our own deadline cutting the call short is one) lets the
      // remembered lease stand in; anything else the store says stops the start (decision 10).
      if (!signal.aborted && storeFailure(err) !== 'unreachable') throw err;
      const cached = readCache(o.stateDir, o.nodeName);
      if (cached) {
        o.log.warn(
          'cluster store unreachable: using the remembered pod CIDRs until the store confirms them',
          { podCIDRs: cached, err: String(err) },
        );
        return { podCIDRs: cached, remembered: true };
      }
      if (Date.now() + delay > deadline) throw err;
      o.log.warn('cluster store unreachable, retrying', { err: String(err), retryMs: delay });
      await sleep(delay);
      continue;
    }
    writeCache(o.stateDir, { nodeName: o.nodeName, podCIDRs: cidrs });
    return { podCIDRs: cidrs, remembered: false };
  }
}

/** The store's word on the node's CIDRs: its lease from `pool`, or without one what its record says. */
function askStore(
  o: ClusterNodeOptions,
  pool: PodCIDRPool | undefined,
  signal: AbortSignal,
): Promise<string[]> {
  return pool
    ? o.store.leasePodCIDRs(o.nodeName, pool, { signal })
    : recordedCIDRs(o.store, o.nodeName, signal);
}

function sameCIDRs(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join(',') === [...b].sort().join(',');
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

/**
 * The membership. Two loops: the watch records each store event in `#peers` and in the pending
 * changes, and never waits for the kernel; the programming loop takes all pending changes at once
 * (the events that arrived while it was busy form one batch), checks the records (peer-check.ts) and
 * hands the overlay only what changed (`updatePeers`). A full converge (`setPeers`) runs after every
 * list (start, a watch restart), after the store comes back from an outage, every `resyncMs`, and
 * after a failure. The overlay's requests go out in batches on a worker thread, so CNI calls are not
 * held up behind a join of thousands of peers.
 */
export class ClusterNode {
  readonly #o: ClusterNodeOptions;
  readonly #overlay: Overlay;
  readonly #record: NodeRecord;
  readonly #abort = new AbortController();
  /** Peers by name, as last seen in the store (never this node). */
  readonly #peers = new Map<string, NodeRecord>();
  /** Changes not yet programmed: the record, or undefined when deleted. */
  #pending = new Map<string, NodeRecord | undefined>();
  /** A full converge is due (set by a list, a reconnect, the timer, a failure). */
  #full = false;
  /** Whether a list has filled `#peers` yet (no converge before it: it would remove every route). */
  #listed = false;
  #wake: (() => void) | undefined;
  readonly #check: PeerCheck;
  #status: OverlayStatus = { peers: [], skipped: [] };
  #registered = false;
  #lease: LeaseState;
  #loop: Promise<void> = Promise.resolve();
  #programming: Promise<void> = Promise.resolve();
  #cniBusy: (() => boolean) | undefined;

  constructor(o: ClusterNodeOptions, overlay: Overlay, record: NodeRecord) {
    this.#o = o;
    this.#overlay = overlay;
    this.#record = record;
    this.#lease = o.remembered ? { state: 'remembered', since: new Date() } : { state: 'leased' };
    this.#check = new PeerCheck({
      self: record,
      ...(o.clusterCIDRs ? { clusterCIDRs: o.clusterCIDRs } : {}),
    });
  }

  /** Registers the node record and follows the store, in the background, until `stop`. */
  start(): void {
    this.#loop = this.#run();
    if (!this.#o.legacyPeerProgramming) this.#programming = this.#program();
  }

  get record(): NodeRecord {
    return this.#record;
  }

  /** The peers as last seen in the store (never this node), by name. */
  get peers(): NodeRecord[] {
    return [...this.#peers.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Peer records refused since start (each refusal, or change of its reason, once). */
  /** Records the store skipped as invalid (the Kubernetes store counts them; others: 0). */
  get invalidRecordsTotal(): number {
    return this.#o.store.invalidRecords ?? 0;
  }

  get refusedTotal(): number {
    return this.#check.refusedTotal;
  }

  /**
   * Why the node must hand out no address from its pod CIDRs (the store says it does not hold them),
   * or undefined. ADD, CNI STATUS and /readyz ask.
   */
  get leaseProblem(): string | undefined {
    return this.#lease.state === 'not-held' ? this.#lease.reason : undefined;
  }

  status(): {
    store: string;
    health: StoreHealth;
    registered: boolean;
    lease: LeaseState;
    mode: string;
    overlay: OverlayStatus;
    refused: Array<{ name: string; reason: string }>;
  } {
    return {
      store: this.#o.store.description,
      health: this.#o.store.health(),
      registered: this.#registered,
      lease: this.#lease,
      mode: this.#overlay.mode,
      overlay: this.#status,
      refused: this.#check.refused,
    };
  }

  async #run(): Promise<void> {
    const { log } = this.#o;
    const signal = this.#abort.signal;
    for (let delay = 200; !signal.aborted; delay = Math.min(delay * 2, BACKOFF_MAX_MS)) {
      try {
        // Remembered CIDRs are checked before the record that claims them is published.
        if (this.#lease.state === 'remembered') await this.#confirmLease(signal);
        if (!this.#registered && this.#lease.state !== 'not-held') {
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
        this.#listed = true;
        this.#full = true;
        if (this.#o.legacyPeerProgramming) await this.#legacyApply();
        this.#poke();
        let seen = 0;
        for await (const ev of this.#o.store.watchNodes({ signal, since: list })) {
          delay = 200;
          // One etcd message carries a whole transaction's events (100 in a join of registering
          // agents), all delivered in one turn of the event loop: let I/O callbacks (a CNI call's
          // file and netlink work) in between.
          if (++seen % WATCH_YIELD_EVERY === 0) await setImmediatePromise();
          if (ev.node.name === this.#record.name) {
            // This node's CIDRs are fixed while it runs: new ones would renumber running pods.
            if (ev.type === 'put' && !sameCIDRs(ev.node.podCIDRs, this.#record.podCIDRs)) {
              log.error(
                "this node's pod CIDRs changed in the cluster store: refused, the node keeps its own",
                {
                  running: this.#record.podCIDRs,
                  store: ev.node.podCIDRs,
                },
              );
            }
            continue;
          }
          if (ev.type === 'put') this.#peers.set(ev.node.name, ev.node);
          else this.#peers.delete(ev.node.name);
          this.#pending.set(ev.node.name, ev.type === 'put' ? ev.node : undefined);
          if (this.#o.legacyPeerProgramming) await this.#legacyApply();
          else this.#poke();
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

  /**
   * Asks the store for this node's lease, as a start would have (a CIDR this node holds comes back
   * as it is; a node that holds none is given one). The same CIDRs: confirmed. Others, or a refusal:
   * the node does not hold the CIDRs it runs with, and may not hand out their addresses. No answer:
   * throws, and the loop asks again after its backoff.
   */
  async #confirmLease(signal: AbortSignal): Promise<void> {
    const { log, nodeName } = this.#o;
    const running = this.#record.podCIDRs;
    let stored: string[];
    try {
      stored = await askStore(this.#o, this.#o.remembered?.pool, signal);
    } catch (err) {
      // No answer about the lease (unreachable; our credentials refused, which rotated files may
      // fix; an error of etcd's own): ask again.
      if (signal.aborted || storeFailure(err) !== 'answered') throw err;
      this.#notHeld(
        `the cluster store refuses the remembered lease: ${err instanceof Error ? err.message : String(err)}`,
      );
      // The store's word refuses the lease: node-lease.json no longer stands for it either.
      this.#rememberLease(undefined);
      return;
    }
    if (sameCIDRs(stored, running)) {
      this.#lease = { state: 'confirmed' };
      log.info('remembered pod CIDRs confirmed by the cluster store', { podCIDRs: running });
      return;
    }
    this.#notHeld(
      `the cluster store gives node ${nodeName} ${stored.join(', ')}, not ${running.join(', ')} ` +
        '(remembered in node-lease.json while the store did not answer)',
    );
    // What the store says this node holds is what the next start uses, even without the store.
    this.#rememberLease(stored);
  }

  /** Rewrites node-lease.json (undefined: removes it); a failure is logged, the state stays. */
  #rememberLease(podCIDRs: string[] | undefined): void {
    const { stateDir, nodeName, log } = this.#o;
    try {
      if (podCIDRs === undefined) removeCache(stateDir);
      else writeCache(stateDir, { nodeName, podCIDRs });
    } catch (err) {
      log.error('node-lease.json not updated: the next start without the store may use stale pod CIDRs', {
        err: String(err),
        podCIDRs,
      });
    }
  }

  #notHeld(why: string): void {
    const reason =
      `pod CIDRs ${this.#record.podCIDRs.join(', ')} not held: ${why}; ` +
      'no address is handed out from them and the node record is not published: restart the agent ' +
      '(it starts with the lease the store gives, or says why it cannot), and recreate the pods given addresses from them';
    this.#lease = { state: 'not-held', reason, since: new Date() };
    this.#o.log.error('pod CIDRs not held by this node', { reason });
  }

  #poke(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** The programming loop: deltas as changes come, a full converge when one is due. */
  async #program(): Promise<void> {
    const signal = this.#abort.signal;
    const resyncMs = this.#o.resyncMs ?? RESYNC_MS;
    let lastFull = Date.now();
    let health = this.#o.store.health();
    let delay = 200;
    while (!signal.aborted) {
      // Back from an outage (also one that began and ended between two looks: `since` moved while
      // the store is healthy): events may have been missed.
      const now = this.#o.store.health();
      if (now.ok && (!health.ok || now.since.getTime() !== health.since.getTime())) this.#full = true;
      health = now;
      if (Date.now() - lastFull >= resyncMs) this.#full = true;
      try {
        if (this.#full && this.#listed) {
          this.#full = false;
          lastFull = Date.now();
          await this.#converge();
          delay = 200;
          continue;
        }
        if (this.#pending.size > 0) {
          await this.#delta();
          delay = 200;
          continue;
        }
      } catch (err) {
        if (signal.aborted) return;
        this.#full = true;
        this.#o.log.warn('peers not all programmed; a full converge follows', {
          err: String(err),
          retryMs: delay,
        });
        await sleep(delay, undefined, { signal }).catch(() => undefined);
        delay = Math.min(delay * 2, BACKOFF_MAX_MS);
        continue;
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          signal.removeEventListener('abort', wake);
          this.#wake = undefined;
          resolve();
        };
        const timer = setTimeout(
          wake,
          Math.min(HEALTH_POLL_MS, Math.max(0, lastFull + resyncMs - Date.now())),
        );
        signal.addEventListener('abort', wake);
        this.#wake = wake;
      });
    }
  }

  async #converge(): Promise<void> {
    this.#pending = new Map();
    const changes = this.#check.reset(this.#peers.values());
    this.#reportRefused(changes.refused);
    const accepted = this.#check.accepted;
    await this.#o.onPeers?.(accepted);
    const before = this.#status.peers.length;
    this.#status = await this.#overlay.setPeers(accepted);
    this.#o.log.info('peers converged', {
      peers: this.#status.peers.length,
      before,
      refused: this.#check.refused.length,
      skipped: this.#status.skipped,
    });
  }

  async #delta(): Promise<void> {
    const pending = this.#pending;
    this.#pending = new Map();
    const changes = await this.#checkInSlices(pending);
    if (changes.put.length === 0 && changes.removed.length === 0) return;
    // The listener first: a new peer's CIDR is kept from masquerade before a route leads there.
    await this.#o.onPeers?.(this.#check.accepted);
    // In slices, with a turn of the event loop between them and CNI calls in flight let through
    // first: a thousand peers' requests at once would hold up every CNI call for tens of milliseconds.
    for (let i = 0; i < changes.put.length || i < changes.removed.length; i += PEER_SLICE) {
      if (i > 0) await setImmediatePromise();
      await this.#letCniFirst();
      await this.#overlay.updatePeers({
        put: changes.put.slice(i, i + PEER_SLICE),
        removed: changes.removed.slice(i, i + PEER_SLICE),
      });
    }
    this.#status = this.#overlay.status();
    this.#o.log.info('peers programmed', {
      put: changes.put.length,
      removed: changes.removed.length,
      peers: this.#status.peers.length,
      names: [...changes.put.map((p) => p.name), ...changes.removed].slice(0, 10),
    });
  }

  /**
   * The records' check (peer-check.ts), DELTA_SLICE records at a time with a turn of the event loop
   * between slices: a join's batch of thousands checked at once held the event loop for tens of
   * milliseconds. Each slice is an ordinary incremental check; what they accept and remove is merged
   * (a name's last word counts: a refused record accepted when an earlier slice freed its CIDR may
   * change again in a later one).
   */
  async #checkInSlices(pending: Map<string, NodeRecord | undefined>): Promise<AcceptedChanges> {
    const put = new Map<string, NodeRecord>();
    const removed = new Set<string>();
    let slice = new Map<string, NodeRecord | undefined>();
    const flush = async (): Promise<void> => {
      if (put.size > 0 || removed.size > 0) await setImmediatePromise();
      const c = this.#check.update(slice);
      slice = new Map();
      this.#reportRefused(c.refused);
      for (const name of c.removed) {
        put.delete(name);
        removed.add(name);
      }
      for (const record of c.put) {
        removed.delete(record.name);
        put.set(record.name, record);
      }
    };
    for (const [name, record] of pending) {
      slice.set(name, record);
      if (slice.size >= DELTA_SLICE) await flush();
    }
    if (slice.size > 0) await flush();
    return { put: [...put.values()], removed: [...removed], refused: [] };
  }

  /**
   * CNI calls first: while one is in flight, the next slice waits (at most CNI_FIRST_MAX_MS, so a
   * node that is never quiet still converges). A slice's kernel work contends with a call's own
   * netlink requests for the kernel's rtnl lock and for the CPU.
   */
  async #letCniFirst(): Promise<void> {
    const busy = this.#cniBusy;
    if (!busy) return;
    const until = Date.now() + CNI_FIRST_MAX_MS;
    while (busy() && Date.now() < until && !this.#abort.signal.aborted) await sleep(1);
  }

  /** Tells the membership when CNI calls are in flight (the agent's scheduler), so they go first. */
  yieldTo(cniBusy: () => boolean): void {
    this.#cniBusy = cniBusy;
  }

  #reportRefused(refused: Array<{ name: string; reason: string }>): void {
    for (const r of refused) this.#o.log.warn('peer record refused: no routes to it', r);
  }

  /** Before issue 17: every change converges all peers, on the watch's own turn (bench only). */
  async #legacyApply(): Promise<void> {
    this.#pending.clear();
    const before = this.#status.peers.join(',');
    const peers = [...this.#peers.values()];
    await this.#o.onPeers?.(peers);
    this.#status = await this.#overlay.setPeers(peers);
    if (this.#status.peers.join(',') !== before || this.#status.skipped.length > 0) {
      this.#o.log.info('peers programmed', { peers: this.#status.peers.length });
    }
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    this.#poke();
    await this.#loop;
    await this.#programming;
    await this.#overlay.stop();
  }
}
