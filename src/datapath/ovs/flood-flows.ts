/**
 * The multicast flows that list ports, derived from OVSDB's port rows as they are now: one per VLAN
 * with local pods (the VLAN's pods, and the uplink with the tag), and in bridging mode the uplink's
 * untagged multicast (to the gateway and the untagged pool pods; decision 30). Each is rewritten when
 * a port it lists comes or goes, and all of them at a replay.
 */
import type { Prefix } from '../../base/ip.js';
import type { FlowTable } from './openflow/flow-table.js';
import {
  type GatewayFlowsInput,
  UNDERLAY_FLOOD_COOKIE,
  underlayFloodFlow,
  vlanCookie,
  vlanFloodFlow,
} from './pipeline.js';
import { parsePodExternalIds, recordOnUnderlay } from './port-record.js';
import type { PortRow } from './vswitch-db.js';

/** The multicast flow of each VLAN that has pod ports in `rows` (only of `only`, when given). */
export function vlanFloodFlows(rows: PortRow[], uplinkOfport: number | undefined, only?: number): string[] {
  const members = new Map<number, number[]>();
  for (const row of rows) {
    const vlan = parsePodExternalIds(row.externalIds)?.vlan;
    if (!vlan || (only !== undefined && vlan !== only) || row.ofport === undefined || row.ofport < 1)
      continue;
    members.set(vlan, [...(members.get(vlan) ?? []), row.ofport]);
  }
  return [...members].map(([vlan, ports]) =>
    vlanFloodFlow(
      vlan,
      ports.sort((a, b) => a - b),
      uplinkOfport,
    ),
  );
}

/** Bridging mode: the uplink's untagged multicast flow; none without an uplink. */
export function underlayFloodFlows(
  rows: PortRow[],
  gw: GatewayFlowsInput,
  cidrs: readonly Prefix[],
): string[] {
  if (gw.uplinkOfport === undefined) return [];
  const pool: number[] = [];
  for (const row of rows) {
    const rec = parsePodExternalIds(row.externalIds);
    if (!rec || rec.vlan || row.ofport === undefined || row.ofport < 1) continue;
    if (recordOnUnderlay(rec, cidrs)) pool.push(row.ofport);
  }
  return [
    underlayFloodFlow(
      gw.ofport,
      pool.sort((a, b) => a - b),
    ),
  ];
}

/**
 * The flow of one flood group from `rows`: of VLAN `vlan`, or with 0 the uplink's untagged one;
 * undefined when the group has nothing to list (its flow goes).
 */
export function floodFlowOf(
  rows: PortRow[],
  gw: GatewayFlowsInput,
  cidrs: readonly Prefix[],
  vlan: number,
): string | undefined {
  return vlan === 0 ? underlayFloodFlows(rows, gw, cidrs)[0] : vlanFloodFlows(rows, gw.uplinkOfport, vlan)[0];
}

/** Every flood group's flow. */
export function floodFlows(rows: PortRow[], gw: GatewayFlowsInput, cidrs: readonly Prefix[]): string[] {
  return [...vlanFloodFlows(rows, gw.uplinkOfport), ...underlayFloodFlows(rows, gw, cidrs)];
}

/**
 * Rewrites the flow of one flood group (a VLAN, or 0: the uplink's untagged one) from the pod ports
 * OVSDB holds now, or removes it when the group lists nothing. Updates of one group run one at a time,
 * each after its caller's port change, so the last one always sees every port.
 */
export class FloodSync {
  readonly #queues = new Map<number, Promise<void>>();
  readonly #o: { rows: () => Promise<PortRow[]>; gateway: () => GatewayFlowsInput; cidrs: readonly Prefix[] };

  constructor(o: {
    rows: () => Promise<PortRow[]>;
    gateway: () => GatewayFlowsInput;
    cidrs: readonly Prefix[];
  }) {
    this.#o = o;
  }

  sync(flows: FlowTable, vlan: number): Promise<void> {
    const run = async () => {
      const flow = floodFlowOf(await this.#o.rows(), this.#o.gateway(), this.#o.cidrs, vlan);
      if (flow) await flows.apply({ add: [flow] });
      else await flows.deleteCookie(vlan === 0 ? UNDERLAY_FLOOD_COOKIE : vlanCookie(vlan));
    };
    const next = (this.#queues.get(vlan) ?? Promise.resolve()).then(run, run);
    const tail = next.catch(() => undefined);
    this.#queues.set(vlan, tail);
    void tail.then(() => {
      if (this.#queues.get(vlan) === tail) this.#queues.delete(vlan);
    });
    return next;
  }
}
