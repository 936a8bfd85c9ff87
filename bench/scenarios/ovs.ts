/**
 * Scenario 4: the OVS datapath. Scenarios 1 (one at a time) and 2 (bursts) again, with the subjects
 * podwire on OVS (its node with a private Open vSwitch, userspace netdev datapath) and podwire on the
 * Linux bridge instead of podwire and the reference, reported as absolute figures and as the ratio
 * OVS / Linux bridge. No reference plugin programs OVS, so there is no target, only the must that no
 * call fails. Each part starts fresh nodes, as scenarios 1 and 2 do.
 */
import { ovsAvailable } from '../../bed/ovs.js';
import type { BenchContext } from '../scenario.js';
import { ratio, type Stats } from '../stats.js';
import { startPodwire } from '../subjects.js';
import { type BurstResult, runBurst } from './burst.js';
import { runSequential, type SequentialResult } from './sequential.js';

export interface OvsOptions {
  pods: number;
  /** Pods per chunk in the sequential part; the two datapaths alternate chunk by chunk. */
  chunk: number;
  sizes: number[];
  reps: number;
}

/** One row of the scenario's table: p50/p99 on each datapath and their ratio OVS / Linux bridge. */
export interface OvsFigure {
  figure: string;
  ovs: { p50: number; p99: number };
  bridge: { p50: number; p99: number };
  ratioP50: number;
  ratioP99: number;
}

export interface OvsResult {
  options: OvsOptions;
  /** Why the scenario did not run (the OVS tools are not installed); nothing else is set then. */
  skipped?: string;
  sequential?: SequentialResult;
  burst?: BurstResult;
  figures: OvsFigure[];
}

export async function runOvs(ctx: BenchContext, options: OvsOptions): Promise<OvsResult> {
  if (!ovsAvailable()) {
    ctx.progress('scenario 4: skipped (Open vSwitch is not installed)');
    return { options, skipped: 'Open vSwitch (ovsdb-server, ovs-vswitchd) is not installed', figures: [] };
  }
  // Fresh nodes for each part; OVS first, so that the table's first columns are the OVS figures.
  const part = <T>(body: (c: BenchContext) => Promise<T>): Promise<T> =>
    ctx.teardown.scope(async (teardown) => body({ ...ctx, teardown }));
  const both = async (c: BenchContext) => [
    await startPodwire(c.teardown, { ...c.podwire, datapath: 'ovs' }),
    await startPodwire(c.teardown, c.podwire),
  ];
  const tagged = (c: BenchContext): BenchContext => ({
    ...c,
    progress: (msg) => c.progress(msg.replace(/^scenario \d/, 'scenario 4')),
  });
  const sequential = await part(async (c) =>
    runSequential(tagged(c), { pods: options.pods, chunk: options.chunk }, { subjects: await both(c) }),
  );
  const burst = await part(async (c) =>
    runBurst(tagged(c), { sizes: options.sizes, reps: options.reps }, { subjects: await both(c) }),
  );
  return { options, sequential, burst, figures: figuresOf(sequential, burst) };
}

function figure(name: string, ovs: Stats | undefined, bridge: Stats | undefined): OvsFigure {
  const o = { p50: ovs?.median ?? Number.NaN, p99: ovs?.p99 ?? Number.NaN };
  const b = { p50: bridge?.median ?? Number.NaN, p99: bridge?.p99 ?? Number.NaN };
  return { figure: name, ovs: o, bridge: b, ratioP50: ratio(o.p50, b.p50), ratioP99: ratio(o.p99, b.p99) };
}

function figuresOf(s1: SequentialResult, s2: BurstResult): OvsFigure[] {
  const ovs = s1.subjects['podwire-ovs'];
  const bridge = s1.subjects.podwire;
  const n = s1.options.pods;
  const out = [
    figure(`4. ADD, one at a time (${n} pods)`, ovs?.add, bridge?.add),
    figure(`4. DEL, one at a time (${n} pods)`, ovs?.del, bridge?.del),
  ];
  const reps = s2.options.reps;
  for (const b of s2.sizes) {
    const o = b.subjects['podwire-ovs'];
    const l = b.subjects.podwire;
    out.push(
      figure(`4. burst ${b.size} ADD, first exec to last exit (${reps}×)`, o?.addWall, l?.addWall),
      figure(`4. burst ${b.size} DEL, first exec to last exit (${reps}×)`, o?.delWall, l?.delWall),
      figure(`4. burst ${b.size} ADD, each call`, o?.addCall, l?.addCall),
    );
  }
  return out;
}
