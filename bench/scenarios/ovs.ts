/**
 * Scenario 4: the OVS datapath, scenarios 1 and 2 again with podwire on OVS, reported as absolute
 * figures and as the ratio to podwire on the Linux bridge (no reference plugin programs OVS).
 *
 * The hook, for when the OVS datapath lands: give `startPodwire` (subjects.ts) a `datapath` option
 * that writes it into the agent's config (and starts ovsdb-server/ovs-vswitchd for the node through
 * test/testbed), then run `runSequential` and `runBurst` with the subjects [podwire-ovs, podwire]
 * instead of [podwire, reference], and divide by the bridge figures. Until then the scenario reports
 * itself as skipped with the reason, so the table shows it is missing rather than omitting it.
 */
import type { BenchContext } from '../scenario.js';

export interface OvsResult {
  skipped: string;
}

/** Whether the agent accepts an OVS datapath; for now its config knows only 'linux-bridge'. */
export const OVS_DATAPATH_AVAILABLE = false;

export async function runOvs(ctx: BenchContext): Promise<OvsResult> {
  ctx.progress('scenario 4: skipped (no OVS datapath in the agent yet)');
  return { skipped: "the agent has no OVS datapath yet (src/agent/config.ts accepts only 'linux-bridge')" };
}
