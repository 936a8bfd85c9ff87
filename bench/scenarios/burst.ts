/**
 * Scenario 2: bursts. `size` ADDs started at once on fresh pods, then as many DELs at once: the time
 * from the first exec to the last exit of each, and the failures (the target is zero). Every size is
 * repeated `reps` times, the subjects alternating.
 */
import type { AgentShare } from '../agent-log.js';
import {
  type BenchContext,
  type Failures,
  failuresOf,
  inTurn,
  msOf,
  type PerSubject,
  podwireShare,
  runPhase,
  type TimedBatch,
  warmUp,
  withPods,
} from '../scenario.js';
import { type Stats, summarize } from '../stats.js';
import { type Subject, type SubjectName, startBoth } from '../subjects.js';

export interface BurstOptions {
  sizes: number[];
  reps: number;
}

export interface BurstSubject {
  /** First exec to last exit of the ADD burst, one sample per repetition. */
  addWall: Stats;
  delWall: Stats;
  /** Each call's own exec-to-exit time inside the bursts. */
  addCall: Stats;
  delCall: Stats;
  failures: Failures;
}

export interface BurstSize {
  size: number;
  subjects: PerSubject<BurstSubject>;
}

export interface BurstResult {
  options: BurstOptions;
  sizes: BurstSize[];
  agent: AgentShare | undefined;
}

export interface BurstRunOptions {
  /**
   * Subjects to use instead of a fresh podwire + reference pair: the profile run passes podwire
   * alone, scenario 4 podwire on OVS and on the Linux bridge.
   */
  subjects?: Subject[];
}

export async function runBurst(
  ctx: BenchContext,
  options: BurstOptions,
  run: BurstRunOptions = {},
): Promise<BurstResult> {
  const subjects = run.subjects ?? (await startBoth(ctx.teardown, ctx.podwire));
  await warmUp(ctx, subjects);
  // The agent's share is that of the first subject with an agent (podwire-ovs in scenario 4).
  const measured = subjects.find((s) => s.agent);
  const podwireBatches: TimedBatch[] = [];
  const sizes: BurstSize[] = [];
  let round = 0;
  for (const size of options.sizes) {
    const samples = new Map<string, { add: TimedBatch[]; del: TimedBatch[] }>();
    for (let rep = 0; rep < options.reps; rep++, round++) {
      for (const s of inTurn(subjects, round)) {
        ctx.progress(`scenario 2: ${s.name}, burst of ${size}, repetition ${rep + 1} of ${options.reps}`);
        const [add, del] = await addThenDelBursts(ctx, s, size);
        const entry = samples.get(s.name) ?? { add: [], del: [] };
        entry.add.push(add);
        entry.del.push(del);
        samples.set(s.name, entry);
        if (s === measured) podwireBatches.push(add, del);
      }
    }
    const perSubject: PerSubject<BurstSubject> = {};
    for (const [name, { add, del }] of samples) {
      const addExecs = add.flatMap((b) => b.execs);
      const delExecs = del.flatMap((b) => b.execs);
      perSubject[name as SubjectName] = {
        addWall: summarize(add.map((b) => b.batch.wallMs)),
        delWall: summarize(del.map((b) => b.batch.wallMs)),
        addCall: summarize(msOf(addExecs, 'ADD')),
        delCall: summarize(msOf(delExecs, 'DEL')),
        failures: failuresOf([...addExecs, ...delExecs]),
      };
    }
    sizes.push({ size, subjects: perSubject });
  }
  return { options, sizes, agent: podwireShare(podwireBatches) };
}

/** One burst of ADDs on fresh pods, then, once all have exited, one burst of DELs on the same pods. */
function addThenDelBursts(ctx: BenchContext, s: Subject, size: number): Promise<[TimedBatch, TimedBatch]> {
  return withPods(ctx, `b${size}`, size, async (pods) => [
    await runPhase(ctx, s, pods, ['ADD'], size),
    await runPhase(ctx, s, pods, ['DEL'], size),
  ]);
}
