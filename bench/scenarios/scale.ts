/**
 * Scenario 5: scale on one node. `pods` ADDs one at a time with every pod staying alive, then the
 * DELs. Does an ADD get slower as the node fills up (the last 10 compared to the first 10), and how
 * much memory does the agent hold with all of them alive? The reference runs the same, for context.
 */
import {
  type BenchContext,
  type Failures,
  failuresOf,
  type PerSubject,
  runPhase,
  warmUp,
  withPods,
} from '../scenario.js';
import { median, ratio, type Stats, summarize } from '../stats.js';
import { startBoth } from '../subjects.js';

export interface ScaleOptions {
  pods: number;
}

export interface ScaleSubject {
  add: Stats;
  del: Stats;
  /** Median ADD latency of the first 10 and the last 10 pods, and last / first. */
  firstAddMedian: number;
  lastAddMedian: number;
  lastOverFirst: number;
  failures: Failures;
  /** podwire only: the agent with every pod alive. */
  agentRssKiB?: number;
  agentFds?: number;
}

export interface ScaleResult {
  options: ScaleOptions;
  subjects: PerSubject<ScaleSubject>;
}

const EDGE = 10;

export async function runScale(ctx: BenchContext, options: ScaleOptions): Promise<ScaleResult> {
  const subjects = await startBoth(ctx.teardown, ctx.podwire);
  await warmUp(ctx, subjects);
  const out: PerSubject<ScaleSubject> = {};
  for (const s of subjects) {
    ctx.progress(`scenario 5: ${s.name}, ${options.pods} pods alive at once`);
    out[s.name] = await withPods(ctx, 'scale', options.pods, async (pods) => {
      const add = await runPhase(ctx, s, pods, ['ADD'], 1);
      const alive = s.agent ? { agentRssKiB: s.agent.rssKiB(), agentFds: s.agent.fds() } : {};
      const del = await runPhase(ctx, s, pods, ['DEL'], 1);
      // Jobs keep the pods' order, so the first results are the first pods added.
      const addMs = add.execs.map((r) => r.ms);
      const firstAddMedian = median(addMs.slice(0, EDGE));
      const lastAddMedian = median(addMs.slice(-EDGE));
      return {
        add: summarize(addMs),
        del: summarize(del.execs.map((r) => r.ms)),
        firstAddMedian,
        lastAddMedian,
        lastOverFirst: ratio(lastAddMedian, firstAddMedian),
        failures: failuresOf([...add.execs, ...del.execs]),
        ...alive,
      };
    });
  }
  return { options, subjects: out };
}
