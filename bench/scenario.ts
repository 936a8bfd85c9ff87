/**
 * What every scenario shares: the run context, the definition of a failed call, a warm-up, and a
 * timed phase on one subject, on pods created before and deleted after (outside the timing).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type AgentShare, agentShare } from './agent-log.js';
import type { BatchResult, ExecResult } from './exec-batch.js';
import { createPods, type Pod } from './pods.js';
import type { CniCommand, PodwireOptions, Subject, SubjectName } from './subjects.js';
import type { Teardown } from './teardown.js';

export interface BenchContext {
  teardown: Teardown;
  /** Progress for the operator, on stderr. */
  progress(msg: string): void;
  /** A plugin exec longer than this is killed and counts as failed. */
  execTimeoutMs: number;
  /** How podwire's agent is started (node flags). */
  podwire: PodwireOptions;
}

/** Why a call failed, or undefined when it succeeded. An ADD must also report at least one address. */
export function failureOf(r: ExecResult): string | undefined {
  if (r.code !== 0)
    return `${r.tag}: exit ${r.code}${r.signal ? ` (${r.signal})` : ''}: ${(r.stdout + r.stderr).trim()}`;
  if (!r.tag.startsWith('ADD ')) return undefined;
  try {
    const ips = (JSON.parse(r.stdout) as { ips?: unknown[] }).ips;
    return Array.isArray(ips) && ips.length > 0 ? undefined : `${r.tag}: result without ips: ${r.stdout}`;
  } catch {
    return `${r.tag}: result is not JSON: ${r.stdout}`;
  }
}

/** Failures of a set of calls: their count and the first few messages, for the report. */
export interface Failures {
  count: number;
  samples: string[];
}

export function failuresOf(results: readonly ExecResult[]): Failures {
  const msgs = results.map(failureOf).filter((m): m is string => m !== undefined);
  return { count: msgs.length, samples: msgs.slice(0, 3) };
}

/** Call latencies of one command (the word before the container ID in the tag). */
export function msOf(results: readonly ExecResult[], command: CniCommand): number[] {
  return results.filter((r) => r.tag.startsWith(`${command} `)).map((r) => r.ms);
}

export interface TimedBatch {
  batch: BatchResult;
  execs: ExecResult[];
  /** The agent's log lines written during the batch (podwire only; '' for the reference). */
  agentLog: string;
}

/** Creates `count` fresh pod namespaces, runs `body` on them, deletes them: all outside any timing. */
export async function withPods<T>(
  ctx: BenchContext,
  prefix: string,
  count: number,
  body: (pods: Pod[]) => Promise<T>,
): Promise<T> {
  ctx.teardown.check();
  const set = await createPods(ctx.teardown, prefix, count);
  try {
    return await body(set.pods);
  } finally {
    await set.delete();
  }
}

/**
 * The timed part: every pod gets `commands` one after the other (e.g. ADD then DEL), with at most
 * `concurrency` pods in flight. `concurrency` = pods.length starts them all at once (a burst).
 */
export async function runPhase(
  ctx: BenchContext,
  subject: Subject,
  pods: readonly Pod[],
  commands: readonly CniCommand[],
  concurrency: number,
): Promise<TimedBatch> {
  ctx.teardown.check();
  const offset = subject.agent?.logOffset() ?? 0;
  const batch = await subject.driver.run(
    {
      jobs: pods.map((pod) => commands.map((cmd) => subject.call(cmd, pod))),
      concurrency,
      timeoutMs: ctx.execTimeoutMs,
    },
    ctx.teardown.signal,
  );
  // The agent logs a call before answering it, but this process reads that pipe asynchronously.
  if (subject.agent) await sleep(50);
  const log = subject.agent?.logsSince(offset) ?? '';
  // Complete lines only, so that the logs of several batches can be joined.
  return { batch, execs: batch.results.flat(), agentLog: log.slice(0, log.lastIndexOf('\n') + 1) };
}

/**
 * A few ADD/DEL pairs before measuring, on every subject: the reference creates its bridge on the
 * first ADD, the agent's JIT warms up. A failure here means the set-up is broken: stop at once.
 */
export async function warmUp(ctx: BenchContext, subjects: readonly Subject[], pairs = 5): Promise<void> {
  for (const s of subjects) {
    const { execs } = await withPods(ctx, 'warm', pairs, (pods) => runPhase(ctx, s, pods, ['ADD', 'DEL'], 1));
    const f = failuresOf(execs);
    if (f.count > 0) throw new Error(`warm-up of ${s.name} failed:\n  ${f.samples.join('\n  ')}`);
  }
}

/** Alternates the order of the subjects from one round to the next, so that neither always goes first. */
export function inTurn<T>(subjects: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...subjects] : [...subjects].reverse();
}

/** The agent's share of a scenario's podwire calls, or undefined for a scenario without podwire. */
export function podwireShare(batches: readonly TimedBatch[]): AgentShare | undefined {
  if (batches.length === 0) return undefined;
  return agentShare(
    batches.map((b) => b.agentLog).join(''),
    batches.flatMap((b) => b.execs),
  );
}

export type PerSubject<T> = Partial<Record<SubjectName, T>>;
