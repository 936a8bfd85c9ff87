/**
 * CNI STATUS (1.1.0): can the agent serve ADD? 50 when it cannot (the cluster store says this node
 * does not hold the pod CIDRs it runs with, or a range is full); 51 when, in
 * addition, pods have limited connectivity: the datapath is not ready, or the cluster store is
 * unreachable (routes to peers are frozen as they were: pods of nodes that join meanwhile are not
 * reachable). ADD itself keeps working through a store outage on a node whose CIDR is known.
 */
import { LimitedConnectivityError, NotAvailableError } from '../../base/errors.js';
import type { AgentContext } from '../context.js';

export function cmdStatus(ctx: AgentContext): void {
  const leaseProblem = ctx.cluster?.leaseProblem;
  if (leaseProblem !== undefined) throw new NotAvailableError(leaseProblem);
  const dp = ctx.datapath.status();
  if (!dp.ready) {
    throw new LimitedConnectivityError(`datapath ${ctx.datapath.kind} not ready: ${dp.reason}`);
  }
  const store = ctx.cluster?.status();
  if (store && !store.health.ok) {
    throw new LimitedConnectivityError(
      `cluster store ${store.store} unreachable since ${store.health.since.toISOString()}: ${store.health.error}; routes to peers are frozen`,
    );
  }
  for (const r of ctx.ipam.usage()) {
    if (BigInt(r.used) >= r.size) {
      throw new NotAvailableError(`IPAM range ${r.rangeId} is exhausted (${r.used} of ${r.size} in use)`);
    }
  }
}
