/**
 * The OVS datapath's `PolicyBackend` (decision 46): compiled NetworkPolicy as the conjunctive flows of
 * policy-flows.ts, in tables 47-49 of the bridge's pipeline. Each apply is one atomic OpenFlow bundle
 * of the difference between the policy flows the switch holds and those wanted (flows of other
 * cookies are never read or touched), so a packet meets the old rules or the new, and an unchanged
 * rule keeps its flows and their counters.
 */
import { DatapathError } from '../../base/errors.js';
import type { PodPolicy } from '../../policy/model.js';
import type { PolicyBackend, RuleCounters } from '../policy-backend.js';
import type { FlowTable } from './openflow/flow-table.js';
import {
  ConjunctionIds,
  type CounterKey,
  POLICY_COOKIE,
  POLICY_COOKIE_MASK,
  type PolicyNode,
  policyBaseFlows,
  policyFlows,
} from './policy-flows.js';

/** Runs `fn` alone among the writers of the bridge's whole flow table (the datapath's replay). */
export type FlowTableLock = <T>(fn: () => Promise<T>) => Promise<T>;

export class OvsPolicyBackend implements PolicyBackend {
  readonly #flows: FlowTable;
  readonly #node: () => PolicyNode;
  readonly #lock: FlowTableLock;
  readonly #ids = new ConjunctionIds();
  /** What each counting cookie of the last successful apply counts. */
  #counters = new Map<bigint, CounterKey>();
  /** The pods of the last successful apply; undefined before the first (flows found are adopted). */
  #applied: readonly PodPolicy[] | undefined;

  /**
   * `flows`: the bridge's flow table (its connection is the caller's); `node`: the gateway's port and
   * the node's addresses (a function: the gateway's port may change when the switch restarts);
   * `lock`: shared with whatever else replaces the whole table (OvsDatapath's replay), which takes
   * this backend's flows from `flowsInForce`.
   */
  constructor(flows: FlowTable, node: PolicyNode | (() => PolicyNode), lock?: FlowTableLock) {
    this.#flows = flows;
    if (typeof node === 'function') this.#node = node;
    else {
      const fixed = { gatewayOfport: node.gatewayOfport, nodeIps: [...node.nodeIps] };
      this.#node = () => fixed;
    }
    this.#lock = lock ?? ((fn) => fn());
  }

  /**
   * The policy flows the switch must hold now: those of the last apply (with the gateway's port as it
   * is now), or undefined before the first apply (the flows in the switch are adopted as they are).
   * For a caller that replaces the whole table under the lock.
   */
  flowsInForce(): string[] | undefined {
    if (this.#applied === undefined) return undefined;
    return policyFlows(this.#node(), this.#applied, this.#ids).flows;
  }

  /** Installs the fixed flows, keeping any pod's flows already there (a restarted agent adopts them until its first apply). */
  async start(): Promise<void> {
    const have = await this.#flows.dumpMasked(POLICY_COOKIE, POLICY_COOKIE_MASK);
    if (have.length > 0) return;
    await this.#install(() => policyBaseFlows(this.#node()));
  }

  async apply(pods: readonly PodPolicy[]): Promise<void> {
    // Built in full before anything is sent: bad input throws there with the switch untouched.
    const copy = [...pods];
    let counters = this.#counters;
    await this.#install(() => {
      const built = policyFlows(this.#node(), copy, this.#ids);
      counters = built.counters;
      return built.flows;
    }, copy);
    this.#counters = counters;
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
    await this.#install(() => []);
    this.#counters = new Map();
    this.#applied = undefined;
  }

  /** `build` runs under the lock (the gateway's port as it is then); `pods`: what it enforces, kept once installed. */
  async #install(build: () => string[], pods?: readonly PodPolicy[]): Promise<void> {
    await this.#lock(async () => {
      const flows = build();
      try {
        await this.#flows.replaceMasked(flows, POLICY_COOKIE, POLICY_COOKIE_MASK);
      } catch (err) {
        throw new DatapathError(`installing ${flows.length} policy flows: ${(err as Error).message}`, {
          cause: err,
        });
      }
      if (pods) this.#applied = pods;
    });
  }
}
