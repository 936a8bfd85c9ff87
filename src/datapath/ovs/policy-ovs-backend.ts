/**
 * The OVS datapath's `PolicyBackend` (decision 46): compiled NetworkPolicy as the conjunctive flows of
 * policy-flows.ts, in tables 47-49 of the bridge's pipeline. Each apply is one atomic OpenFlow bundle
 * of the difference between the policy flows the switch holds and those wanted (flows of other
 * cookies are never read or touched), so a packet meets the old rules or the new, and an unchanged
 * rule keeps its flows and their counters.
 *
 * A bundle changes the flow tables, not the flows ovs-vswitchd has cached in the datapath: until its
 * revalidators have gone over them (for seconds on a loaded node, decision 50), a new connection that
 * matches a cached flow gets the old verdict. So an apply that changed any flow resolves only once the
 * cache is flushed (`flushCache`, decision 52): a denied connection is denied when apply() returns.
 *
 * The difference is taken against the flows the last install left (decision 54), not against a dump
 * of the switch: at 1000 pods and 1000 policies the switch holds about 105 000 policy flows, and
 * dumping and parsing them took seconds per change. The switch is read again (a dump, and the
 * difference against it) on the first install, after any failed one, after a replay of the whole
 * table (`flowsInForce`), and when the last read is older than `recheckMs`: whatever changed the
 * flows behind the backend's back (an operator's `ovs-ofctl`) is put right by the next apply after it.
 */
import { DatapathError } from '../../base/errors.js';
import type { PodPolicy } from '../../policy/model.js';
import type { PolicyBackend, RuleCounters } from '../policy-backend.js';
import type { FlowTable, ReplaceOutcome } from './openflow/flow-table.js';
import { type FlowChange, PolicyFlowBuilder } from './policy-flow-builder.js';
import {
  ConjunctionIds,
  type CounterKey,
  POLICY_COOKIE,
  POLICY_COOKIE_MASK,
  type PolicyNode,
} from './policy-flows.js';

/** Runs `fn` alone among the writers of the bridge's whole flow table (the datapath's replay). */
export type FlowTableLock = <T>(fn: () => Promise<T>) => Promise<T>;

export interface OvsPolicyBackendOptions {
  /** Shared with whatever else replaces the whole table (OvsDatapath's replay). */
  lock?: FlowTableLock;
  /**
   * Empties the datapath's flow cache (`ovs-appctl revalidator/purge`), after every apply that changed
   * a flow. Without it (a test that judges the flow tables alone) the cache follows when the
   * revalidators run.
   */
  flushCache?: () => Promise<void>;
  /** How old the last read of the switch's policy flows may be before an apply reads them again; default 60 s. */
  recheckMs?: number;
}

const RECHECK_MS = 60_000;

/** What one install sends: the builder's change (`none`: no policy flow at all, for `remove`). */
interface Wanted {
  change: FlowChange;
  none?: boolean;
}

export class OvsPolicyBackend implements PolicyBackend {
  readonly #flows: FlowTable;
  readonly #node: () => PolicyNode;
  readonly #lock: FlowTableLock;
  readonly #flushCache: (() => Promise<void>) | undefined;
  /** A change was installed whose cached flows have not been flushed yet (the flush failed). */
  #flushOwed = false;
  readonly #ids = new ConjunctionIds();
  /** What each counting cookie of the last successful apply counts. */
  #counters = new Map<bigint, CounterKey>();
  /** The pods of the last successful apply; undefined before the first (flows found are adopted). */
  #applied: readonly PodPolicy[] | undefined;
  /** The policy flows as the last install left them (decision 54): each build's change from them. */
  readonly #builder: PolicyFlowBuilder;
  /** Whether the switch holds what the builder says; false: the next install reads the switch. */
  #trusted = false;
  /** When the switch's policy flows were last read (a dump). */
  #readAt = Number.NEGATIVE_INFINITY;
  readonly #recheckMs: number;

  /**
   * `flows`: the bridge's flow table (its connection is the caller's); `node`: the gateway's port and
   * the node's addresses (a function: the gateway's port may change when the switch restarts). A
   * replay under `options.lock` takes this backend's flows from `flowsInForce`.
   */
  constructor(
    flows: FlowTable,
    node: PolicyNode | (() => PolicyNode),
    options: OvsPolicyBackendOptions = {},
  ) {
    this.#flows = flows;
    if (typeof node === 'function') this.#node = node;
    else {
      const fixed = { gatewayOfport: node.gatewayOfport, nodeIps: [...node.nodeIps] };
      this.#node = () => fixed;
    }
    this.#lock = options.lock ?? ((fn) => fn());
    this.#flushCache = options.flushCache;
    this.#recheckMs = options.recheckMs ?? RECHECK_MS;
    this.#builder = new PolicyFlowBuilder(this.#ids);
  }

  /**
   * The policy flows the switch must hold now: those of the last apply (with the gateway's port as it
   * is now), or undefined before the first apply (the flows in the switch are adopted as they are).
   * For a caller that replaces the whole table under the lock.
   */
  flowsInForce(): string[] | undefined {
    // The caller replaces the whole table: what it holds next is read again, not assumed.
    this.#trusted = false;
    if (this.#applied === undefined) return undefined;
    this.#build(this.#applied);
    return this.#builder.all();
  }

  /**
   * The builder's change to `pods`. A failure leaves it empty and the switch to be read again: the
   * next install sends the whole set against a dump.
   */
  #build(pods: readonly PodPolicy[]): FlowChange {
    try {
      return this.#builder.build(this.#node(), pods);
    } catch (err) {
      this.#builder.reset();
      this.#trusted = false;
      throw err;
    }
  }

  /** Installs the fixed flows, keeping any pod's flows already there (a restarted agent adopts them until its first apply). */
  async start(): Promise<void> {
    const have = await this.#flows.dumpMasked(POLICY_COOKIE, POLICY_COOKIE_MASK);
    if (have.length > 0) return;
    await this.#install(() => ({ change: this.#build([]) }));
  }

  async apply(pods: readonly PodPolicy[]): Promise<void> {
    // Built in full before anything is sent: bad input throws there with the switch untouched.
    const copy = [...pods];
    await this.#install(
      () => ({ change: this.#build(copy) }),
      () => {
        this.#applied = copy;
        this.#counters = this.#builder.counters();
      },
    );
  }

  async counters(): Promise<RuleCounters[]> {
    const sums = new Map<string, RuleCounters>();
    for (const s of await this.#flows.dumpMasked(POLICY_COOKIE, POLICY_COOKIE_MASK)) {
      const key = this.#counters.get(s.cookie);
      if (!key) continue;
      const id = `${key.pod}\u0000${key.rule}`;
      const c = sums.get(id) ?? { rule: key.rule, pod: key.pod, packets: 0n, bytes: 0n };
      c.packets += s.packetCount;
      c.bytes += s.byteCount;
      sums.set(id, c);
    }
    return [...sums.values()];
  }

  async remove(): Promise<void> {
    await this.#install(
      () => ({ change: { add: [], remove: this.#builder.all() }, none: true }),
      () => {
        this.#builder.reset();
        this.#counters = new Map();
        this.#applied = undefined;
      },
    );
  }

  /**
   * Makes the switch's policy flows the builder's (or none, for `remove`): the builder's change from the
   * last install, or the whole set against a dump of the switch.
   */
  async #send(w: Wanted): Promise<ReplaceOutcome> {
    // Monotonic: a wall clock stepped back would put the next read off by as much.
    const now = performance.now();
    if (!this.#trusted || now - this.#readAt >= this.#recheckMs) {
      this.#trusted = false;
      const changed = await this.#flows.replaceMasked(
        w.none ? [] : this.#builder.all(),
        POLICY_COOKIE,
        POLICY_COOKIE_MASK,
      );
      this.#readAt = now;
      this.#trusted = true;
      return changed;
    }
    return this.#flows.changeMasked(w.change.add, w.change.remove, POLICY_COOKIE, POLICY_COOKIE_MASK);
  }

  /**
   * `build` runs under the lock (the gateway's port as it is then); `installed` records what the switch
   * now holds, as soon as it holds it: before the flush, which may fail with the flows in place.
   */
  async #install(build: () => Wanted, installed?: () => void): Promise<void> {
    await this.#lock(async () => {
      const wanted = build();
      try {
        const changed = await this.#send(wanted);
        if (changed.added + changed.deleted > 0) this.#flushOwed = true;
      } catch (err) {
        // Part of a bundle may have been committed before the error was known: flush on the next try,
        // and read the switch again.
        this.#flushOwed = true;
        this.#trusted = false;
        const n = wanted.none ? 0 : this.#builder.all().length;
        throw new DatapathError(`installing ${n} policy flows: ${(err as Error).message}`, {
          cause: err,
        });
      }
      installed?.();
      if (this.#flushOwed && this.#flushCache) {
        try {
          await this.#flushCache();
        } catch (err) {
          // The tables are right; the cache may still hold old verdicts. The caller retries, and the
          // next apply flushes even when it changes nothing.
          throw new DatapathError(
            `the policy flows are installed, but the datapath's cached flows were not flushed: ${(err as Error).message}`,
            { cause: err },
          );
        }
        this.#flushOwed = false;
      }
    });
  }
}
