/**
 * CNI STATUS (1.1.0): can the agent serve ADD? 50 when it cannot (a range is full); 51 when, in
 * addition, existing pods have limited connectivity (the datapath is not ready).
 */
import { PodwireError } from '../cni/errors.js';
import type { AgentContext } from './context.js';

export function cmdStatus(ctx: AgentContext): void {
  const dp = ctx.datapath.status();
  if (!dp.ready) {
    throw new PodwireError(
      'ERR_LIMITED_CONNECTIVITY',
      `datapath ${ctx.datapath.kind} not ready: ${dp.reason}`,
    );
  }
  for (const r of ctx.ipam.usage()) {
    if (BigInt(r.used) >= r.size) {
      throw new PodwireError(
        'ERR_NOT_AVAILABLE',
        `IPAM range ${r.rangeId} is exhausted (${r.used} of ${r.size} in use)`,
      );
    }
  }
}
