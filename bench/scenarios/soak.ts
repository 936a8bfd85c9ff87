/**
 * Scenario 3: soak. `cycles` ADD/DEL cycles with `inFlight` pods in flight, in blocks of
 * `sampleEvery` cycles on fresh pods, the subjects alternating block by block. After each podwire
 * block the agent's RSS and open descriptors are sampled (descriptors once the last connection has
 * closed). Checks: descriptors end at their baseline (taken after the warm-up, before the first
 * cycle); RSS ends within 10% of its value after the first block.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type BenchContext,
  type Failures,
  failuresOf,
  inTurn,
  msOf,
  type PerSubject,
  runPhase,
  type TimedBatch,
  warmUp,
  withPods,
} from '../scenario.js';
import { type Stats, summarize } from '../stats.js';
import { type SubjectName, startBoth } from '../subjects.js';

export interface SoakOptions {
  cycles: number;
  inFlight: number;
  sampleEvery: number;
}

export interface SoakSample {
  cycles: number;
  rssKiB: number;
  fds: number;
}

export interface SoakSubject {
  /** ADD exec-to-exit plus DEL exec-to-exit of one pod. */
  cycle: Stats;
  add: Stats;
  del: Stats;
  /** Cycles per second over the timed blocks. */
  cyclesPerSecond: number;
  failures: Failures;
}

export interface SoakResult {
  options: SoakOptions;
  subjects: PerSubject<SoakSubject>;
  /** podwire's agent: baseline (before the first cycle), then one sample per block. */
  agentBaseline: SoakSample;
  agentSamples: SoakSample[];
  fdsBackToBaseline: boolean;
  /** Last RSS / RSS after the first block. */
  rssGrowth: number;
  rssWithin10Percent: boolean;
}

export async function runSoak(ctx: BenchContext, options: SoakOptions): Promise<SoakResult> {
  const subjects = await startBoth(ctx.teardown, ctx.podwire);
  await warmUp(ctx, subjects);
  const podwire = subjects.find((s) => s.agent);
  const agent = podwire?.agent;
  if (!agent) throw new Error('soak: no podwire agent');
  // The warm-up's last connection closes a few event-loop turns after its answer.
  await sleep(300);
  const baseFds = agent.fds();
  const agentBaseline = { cycles: 0, rssKiB: agent.rssKiB(), fds: baseFds };
  const agentSamples: SoakSample[] = [];
  const batches = new Map<string, TimedBatch[]>();
  let done = 0;
  for (let round = 0; done < options.cycles; round++) {
    const count = Math.min(options.sampleEvery, options.cycles - done);
    for (const s of inTurn(subjects, round)) {
      ctx.progress(`scenario 3: ${s.name}, cycles ${done + 1}-${done + count} of ${options.cycles}`);
      const b = await withPods(ctx, 'soak', count, (pods) =>
        runPhase(ctx, s, pods, ['ADD', 'DEL'], options.inFlight),
      );
      batches.set(s.name, [...(batches.get(s.name) ?? []), b]);
      if (s === podwire) {
        agentSamples.push({
          cycles: done + count,
          rssKiB: agent.rssKiB(),
          fds: await agent.settleFds(baseFds),
        });
      }
    }
    done += count;
  }
  const subjectsOut: PerSubject<SoakSubject> = {};
  for (const [name, bs] of batches) {
    const execs = bs.flatMap((b) => b.execs);
    const cycleMs = bs.flatMap((b) => b.batch.results.map((job) => job.reduce((sum, r) => sum + r.ms, 0)));
    const wall = bs.reduce((sum, b) => sum + b.batch.wallMs, 0);
    subjectsOut[name as SubjectName] = {
      cycle: summarize(cycleMs),
      add: summarize(msOf(execs, 'ADD')),
      del: summarize(msOf(execs, 'DEL')),
      cyclesPerSecond: Math.round((cycleMs.length / wall) * 1000 * 10) / 10,
      failures: failuresOf(execs),
    };
  }
  const first = agentSamples[0];
  const last = agentSamples[agentSamples.length - 1];
  const rssGrowth = first && last ? Math.round((last.rssKiB / first.rssKiB) * 1000) / 1000 : Number.NaN;
  return {
    options,
    subjects: subjectsOut,
    agentBaseline,
    agentSamples,
    fdsBackToBaseline: last !== undefined && last.fds === baseFds,
    rssGrowth,
    rssWithin10Percent: Math.abs(rssGrowth - 1) <= 0.1,
  };
}
