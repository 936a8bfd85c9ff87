/**
 * Egress masquerade at agent start (decision 20, `datapath/egress-masquerade.ts`): the table is
 * installed once, after the datapath and before the membership, whose peer lists then change only
 * the set of kept destinations. Removed at stop. Checked every `checkMs` (default 30 s) and by
 * reconcile: when the table is missing or differs from the wanted one (an outside `nft flush ruleset`),
 * it is put back, logged and counted (`repairs`).
 *
 * Kept destinations (the pod keeps its source address): this node's pod CIDRs, the cluster CIDRs
 * when the node leases from them, every peer's pod CIDRs as the store lists them, and
 * `noMasqueradeCIDRs`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DatapathError } from '../../base/errors.js';
import { isPrefix, parsePrefix, prefixContains } from '../../base/ip.js';
import type { NodeRecord } from '../../cluster/store.js';
import {
  EgressMasquerade,
  type MasqueradeCounters,
  readEgressTable,
  removeEgressTable,
} from '../../datapath/egress-masquerade.js';
import type { Nft } from '../../kernel/nft.js';
import type { AgentConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { UndoStack } from '../undo-stack.js';

/** What the agent does with the masquerade after start: peers, reconcile, metrics. */
export class EgressControl {
  readonly #masq: EgressMasquerade;
  /** Kept whatever the peers: own CIDRs, cluster CIDRs, noMasqueradeCIDRs. */
  readonly #fixed: readonly string[];
  readonly #log: Logger;
  #counting: Promise<MasqueradeCounters[]> | undefined;
  #repairs = 0;
  readonly #stopChecks = new AbortController();
  #checking: Promise<void> | undefined;
  /**
   * Whether a peer CIDR lies inside a fixed one, by CIDR text, for the CIDRs of the last call: a join
   * calls `setPeers` with every peer once per batch of changes, and parsing each peer's CIDRs again
   * was most of that call's time (and garbage).
   */
  #covered = new Map<string, boolean>();

  constructor(masq: EgressMasquerade, fixed: readonly string[], log: Logger) {
    this.#masq = masq;
    this.#fixed = fixed;
    this.#log = log;
  }

  /** The kept destinations now installed. */
  get keep(): readonly string[] {
    return this.#masq.sets.keep;
  }

  /**
   * The membership's list of peers changed: their pod CIDRs become the kept set (a set update, not
   * new rules). A failure is logged and leaves the table as it was; the next change or reconcile
   * tries again.
   */
  async setPeers(peers: readonly NodeRecord[]): Promise<void> {
    // A peer CIDR inside a fixed one (the cluster CIDRs) changes nothing the kernel holds (the set
    // merges intervals): leaving it out spares an `nft` run of the whole set per change in a join.
    const fixed = this.#fixed.map((c) => parsePrefix(c)).filter(isPrefix);
    const known = this.#covered;
    const now = new Map<string, boolean>();
    const keep = [...this.#fixed];
    for (const peer of peers) {
      for (const cidr of peer.podCIDRs) {
        let covered = known.get(cidr);
        if (covered === undefined) {
          const p = parsePrefix(cidr);
          covered = isPrefix(p) && fixed.some((f) => prefixContains(f, p));
        }
        now.set(cidr, covered);
        if (!covered) keep.push(cidr);
      }
    }
    this.#covered = now;
    const before = [...this.keep].sort().join(',');
    if ([...keep].sort().join(',') === before) return;
    try {
      await this.#masq.setKeep(keep);
      this.#log.info('egress masquerade: kept destinations changed', { keep });
    } catch (err) {
      this.#log.warn('egress masquerade: kept destinations not updated', { err: String(err) });
    }
  }

  /** Times the table was found missing or different and put back (periodic check and reconcile). */
  get repairs(): number {
    return this.#repairs;
  }

  /**
   * Puts the table back when it is missing or differs from the wanted one; a failure is logged, not
   * thrown. `by` says who asked (the periodic check, reconcile) for the log.
   */
  async ensure(by = 'reconcile'): Promise<void> {
    try {
      if (await this.#masq.ensure()) {
        this.#repairs++;
        this.#log.warn('egress masquerade table was missing or differed: reinstated', {
          by,
          repairs: this.#repairs,
          keep: this.keep,
        });
      }
    } catch (err) {
      this.#log.error('egress masquerade table could not be checked or reinstated', { by, err: String(err) });
    }
  }

  /**
   * Checks the table every `periodMs` (one `nft -j list` when it is intact), so an outside flush stops
   * egress for at most a period, not until the next peer change, `podwire gc` or restart. One check at
   * a time; `stopChecks` ends it and waits for a check in flight.
   */
  startChecks(periodMs: number): void {
    if (this.#checking) return;
    const signal = this.#stopChecks.signal;
    this.#checking = (async () => {
      while (!signal.aborted) {
        await sleep(periodMs, undefined, { signal }).catch(() => undefined); // aborted: the loop ends
        if (!signal.aborted) await this.ensure('periodic check');
      }
    })();
  }

  async stopChecks(): Promise<void> {
    this.#stopChecks.abort();
    await this.#checking;
  }

  /** Counters for the metrics endpoint; one `nft` run shared by the gauges of one scrape. */
  counters(): Promise<MasqueradeCounters[]> {
    if (!this.#counting) {
      this.#counting = this.#masq.counters().finally(() => {
        this.#counting = undefined;
      });
    }
    return this.#counting;
  }
}

/**
 * Installs the masquerade (or, when turned off, removes a table an earlier run left). In cluster
 * mode the kept set of the table an earlier run left (a restart, a crash) is carried over until the
 * store's first list of peers replaces it, so connections to other nodes' pods opened meanwhile
 * keep their source too.
 */
/** How often the table is checked against the wanted one; `EgressStartOptions.checkMs`. */
export const EGRESS_CHECK_MS = 30_000;

export interface EgressStartOptions {
  /** How often the table is checked and, when it differs, put back; default 30 s. */
  checkMs?: number;
}

export async function startEgress(
  config: AgentConfig,
  nft: Nft,
  log: Logger,
  undo: UndoStack,
  options: EgressStartOptions = {},
): Promise<EgressControl | undefined> {
  if (!config.egressMasquerade) {
    try {
      await removeEgressTable(nft);
    } catch (err) {
      // Without nft there is no table to remove either.
      log.warn('egress masquerade off; could not check for a leftover table', { err: String(err) });
    }
    return undefined;
  }
  const fixed = [
    ...config.podCIDRs,
    ...(config.cluster?.pool?.clusterCIDRs ?? []),
    ...config.noMasqueradeCIDRs,
  ];
  const carried = config.cluster ? ((await readEgressTable(nft))?.keep ?? []) : [];
  const masq = new EgressMasquerade(nft, { sources: config.podCIDRs, keep: [...fixed, ...carried] });
  try {
    await masq.install();
  } catch (err) {
    throw new DatapathError(
      `egressMasquerade: cannot install the nftables table (needs nft and nf_tables NAT); set egressMasquerade: false to run without: ${String(err)}`,
      { cause: err },
    );
  }
  undo.push('egress masquerade', () => masq.remove());
  log.info('egress masquerade installed', { sources: config.podCIDRs, keep: masq.sets.keep });
  const control = new EgressControl(masq, fixed, log);
  control.startChecks(options.checkMs ?? EGRESS_CHECK_MS);
  // Unwound before the table's removal, so no check puts the table back after it.
  undo.push('egress masquerade check', () => control.stopChecks());
  return control;
}
