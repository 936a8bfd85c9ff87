/**
 * What the agent's JSON log says about a batch: the time each call spent inside the agent (its
 * "cni call done" line carries `ms`, from the decoded request to the answer) and, where a line carries
 * `steps` (per-step durations), where that time went. Matching these with the exec-to-exit times
 * gives the relay's share: exec, connect, framing, answer, exit.
 */
import type { ExecResult } from './exec-batch.js';
import { type Stats, summarize } from './stats.js';

interface LogLine {
  msg?: string;
  command?: string;
  containerId?: string;
  ms?: number;
  steps?: Record<string, number>;
}

/** Complete lines only: the last segment is either empty or a line still being read. */
function parseLines(text: string): LogLine[] {
  const out: LogLine[] = [];
  for (const line of text.split('\n').slice(0, -1)) {
    if (!line.startsWith('{')) continue;
    out.push(JSON.parse(line) as LogLine);
  }
  return out;
}

export interface AgentShare {
  /** Request decoded to answer, per command. */
  agentMs: Record<string, Stats>;
  /** Exec-to-exit minus the agent's time, per command: what the relay and the exec cost. */
  outsideMs: Record<string, Stats>;
  /** Per-step durations, per log message that carries `steps` (e.g. "attachment added"). */
  steps: Record<string, Record<string, Stats>>;
  /** Calls the agent logged as failed in this batch. */
  failedCalls: number;
}

/** Joins the agent's log of a batch with the exec timings of the same calls (tag "CMD containerId"). */
export function agentShare(logText: string, execs: readonly ExecResult[]): AgentShare {
  const lines = parseLines(logText);
  const inside = new Map<string, number>();
  const stepSamples: Record<string, Record<string, number[]>> = {};
  let failedCalls = 0;
  for (const l of lines) {
    if (l.msg === 'cni call done' && typeof l.ms === 'number')
      inside.set(`${l.command} ${l.containerId}`, l.ms);
    if (l.msg === 'cni call failed') failedCalls++;
    if (l.steps && l.msg) {
      const byStep = stepSamples[l.msg] ?? {};
      stepSamples[l.msg] = byStep;
      for (const [step, ms] of Object.entries(l.steps)) push(byStep, step, ms);
    }
  }
  const agent: Record<string, number[]> = {};
  const outside: Record<string, number[]> = {};
  for (const e of execs) {
    const ms = inside.get(e.tag);
    if (ms === undefined) continue;
    const command = e.tag.split(' ')[0] as string;
    push(agent, command, ms);
    push(outside, command, e.ms - ms);
  }
  const steps: Record<string, Record<string, Stats>> = {};
  for (const [msg, byStep] of Object.entries(stepSamples)) steps[msg] = mapValues(byStep, summarize);
  return {
    agentMs: mapValues(agent, summarize),
    outsideMs: mapValues(outside, summarize),
    steps,
    failedCalls,
  };
}

function push(into: Record<string, number[]>, key: string, value: number): void {
  const list = into[key] ?? [];
  list.push(value);
  into[key] = list;
}

function mapValues<A, B>(o: Record<string, A>, f: (a: A) => B): Record<string, B> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));
}
