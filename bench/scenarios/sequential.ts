/**
 * Scenario 1: ADD then DEL, one pod at a time, N pods per subject. Latency of each call, exec to
 * exit. The pods are done in chunks that alternate between the subjects, each chunk on fresh pod
 * namespaces.
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

export interface SequentialOptions {
  pods: number;
  /** Pods per chunk; the subjects alternate chunk by chunk. */
  chunk: number;
}

export interface SequentialSubject {
  add: Stats;
  del: Stats;
  failures: Failures;
}

export interface SequentialResult {
  options: SequentialOptions;
  subjects: PerSubject<SequentialSubject>;
  /** podwire: the agent's own time per call and the rest (relay, exec). */
  agent: AgentShare | undefined;
  /** The same for every subject with an agent (scenario 4: podwire on OVS and on the bridge). */
  agents: PerSubject<AgentShare>;
}

export interface SequentialRunOptions {
  /** Subjects to use instead of a fresh podwire + reference pair (scenario 4: podwire on OVS and on the bridge). */
  subjects?: Subject[];
}

export async function runSequential(
  ctx: BenchContext,
  options: SequentialOptions,
  run: SequentialRunOptions = {},
): Promise<SequentialResult> {
  const subjects = run.subjects ?? (await startBoth(ctx.teardown, ctx.podwire));
  await warmUp(ctx, subjects);
  const batches = new Map<string, TimedBatch[]>();
  let done = 0;
  for (let round = 0; done < options.pods; round++) {
    const count = Math.min(options.chunk, options.pods - done);
    for (const s of inTurn(subjects, round)) {
      ctx.progress(`scenario 1: ${s.name}, pods ${done + 1}-${done + count} of ${options.pods}`);
      const b = await withPods(ctx, 's1', count, (pods) => runPhase(ctx, s, pods, ['ADD', 'DEL'], 1));
      batches.set(s.name, [...(batches.get(s.name) ?? []), b]);
    }
    done += count;
  }
  const result: SequentialResult = {
    options,
    subjects: {},
    // The first subject with an agent: podwire, or podwire-ovs in scenario 4.
    agent: podwireShare(batches.get(subjects.find((s) => s.agent)?.name ?? '') ?? []),
    agents: {},
  };
  for (const s of subjects) {
    const share = s.agent ? podwireShare(batches.get(s.name) ?? []) : undefined;
    if (share) result.agents[s.name] = share;
  }
  for (const [name, bs] of batches) {
    const execs = bs.flatMap((b) => b.execs);
    result.subjects[name as SubjectName] = {
      add: summarize(msOf(execs, 'ADD')),
      del: summarize(msOf(execs, 'DEL')),
      failures: failuresOf(execs),
    };
  }
  return result;
}
