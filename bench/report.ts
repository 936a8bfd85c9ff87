/**
 * The bench's result as one object (printed as JSON with --json) and as Markdown tables: the main
 * table (medians, p99, ratio podwire / reference) and scenario 4's (ratio OVS / Linux bridge), then
 * what limits the figures (floors, the agent's share of a call, its steps), the soak samples, and the
 * checks against the issue's targets.
 */
import type { AgentShare } from './agent-log.js';
import type { ProfileResult } from './profile.js';
import type { PerSubject } from './scenario.js';
import type { BurstResult } from './scenarios/burst.js';
import type { CalibrationResult } from './scenarios/calibrate.js';
import type { OvsResult } from './scenarios/ovs.js';
import type { ScaleResult } from './scenarios/scale.js';
import type { SequentialResult } from './scenarios/sequential.js';
import type { SoakResult } from './scenarios/soak.js';
import { ratio, type Stats } from './stats.js';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** A must (zero failures, no descriptor leak) fails the run; a target is reported. */
  kind: 'must' | 'target';
}

export interface BenchReport {
  meta: Record<string, string | number>;
  calibration?: CalibrationResult;
  sequential?: SequentialResult;
  burst?: BurstResult;
  soak?: SoakResult;
  ovs?: OvsResult;
  scale?: ScaleResult;
  profile?: Omit<ProfileResult, 'burst'>;
  checks: Check[];
}

const f = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(1));
const r = (x: number): string => (Number.isNaN(x) ? '-' : x.toFixed(2));

function row(label: string, p: Stats | undefined, ref: Stats | undefined): string {
  const cells = [
    label,
    f(p?.median),
    f(p?.p99),
    f(ref?.median),
    f(ref?.p99),
    r(ratio(p?.median ?? Number.NaN, ref?.median ?? Number.NaN)),
    r(ratio(p?.p99 ?? Number.NaN, ref?.p99 ?? Number.NaN)),
  ];
  return `| ${cells.join(' | ')} |`;
}

function pair<T>(s: PerSubject<T>, pick: (t: T) => Stats): [Stats | undefined, Stats | undefined] {
  return [s.podwire && pick(s.podwire), s.reference && pick(s.reference)];
}

export function mainTable(rep: BenchReport): string {
  const lines = [
    '| figure (ms) | podwire p50 | podwire p99 | reference p50 | reference p99 | ratio p50 | ratio p99 |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  const s1 = rep.sequential;
  if (s1) {
    const n = s1.options.pods;
    lines.push(row(`1. ADD, one at a time (${n} pods)`, ...pair(s1.subjects, (t) => t.add)));
    lines.push(row(`1. DEL, one at a time (${n} pods)`, ...pair(s1.subjects, (t) => t.del)));
  }
  for (const b of rep.burst?.sizes ?? []) {
    const reps = rep.burst?.options.reps ?? 0;
    lines.push(
      row(
        `2. burst ${b.size} ADD, first exec to last exit (${reps}×)`,
        ...pair(b.subjects, (t) => t.addWall),
      ),
    );
    lines.push(
      row(
        `2. burst ${b.size} DEL, first exec to last exit (${reps}×)`,
        ...pair(b.subjects, (t) => t.delWall),
      ),
    );
    lines.push(row(`2. burst ${b.size} ADD, each call`, ...pair(b.subjects, (t) => t.addCall)));
  }
  const s3 = rep.soak;
  if (s3) {
    const o = s3.options;
    lines.push(
      row(
        `3. soak cycle ADD+DEL (${o.cycles}, ${o.inFlight} in flight)`,
        ...pair(s3.subjects, (t) => t.cycle),
      ),
    );
  }
  const s5 = rep.scale;
  if (s5) {
    lines.push(row(`5. scale ADD, ${s5.options.pods} pods alive`, ...pair(s5.subjects, (t) => t.add)));
    const p = s5.subjects.podwire;
    const ref = s5.subjects.reference;
    lines.push(
      `| 5. scale ADD median, first 10 → last 10 | ${f(p?.firstAddMedian)} → ${f(p?.lastAddMedian)} | ×${r(p?.lastOverFirst ?? Number.NaN)} | ${f(ref?.firstAddMedian)} → ${f(ref?.lastAddMedian)} | ×${r(ref?.lastOverFirst ?? Number.NaN)} | | |`,
    );
  }
  if (rep.ovs?.skipped) lines.push(`| 4. OVS datapath | skipped: ${rep.ovs.skipped} | | | | | |`);
  // Only the header when no scenario of the main table ran (e.g. --scenarios 4): leave it out.
  const main = lines.length > 2 ? [lines.join('\n')] : [];
  return [...main, ...ovsTable(rep)].join('\n\n');
}

/** Scenario 4 has its own columns: podwire on OVS against podwire on the Linux bridge. */
function ovsTable(rep: BenchReport): string[] {
  const figures = rep.ovs?.figures ?? [];
  if (figures.length === 0) return [];
  const lines = [
    '| figure (ms), podwire | OVS p50 | OVS p99 | Linux bridge p50 | Linux bridge p99 | ratio p50 | ratio p99 |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const x of figures) {
    const cells = [x.figure, f(x.ovs.p50), f(x.ovs.p99), f(x.bridge.p50), f(x.bridge.p99)];
    lines.push(`| ${[...cells, r(x.ratioP50), r(x.ratioP99)].join(' | ')} |`);
  }
  return [lines.join('\n')];
}

function shareTable(title: string, share: AgentShare | undefined): string[] {
  if (!share) return [];
  const out = [
    `${title}`,
    '',
    '| podwire call | exec to exit p50 | inside the agent p50 / p99 | outside (relay, exec) p50 / p99 |',
    '|---|---:|---:|---:|',
  ];
  for (const cmd of Object.keys(share.agentMs)) {
    const a = share.agentMs[cmd] as Stats;
    const o = share.outsideMs[cmd] as Stats;
    out.push(
      `| ${cmd} | ${f(a.median + o.median)} | ${f(a.median)} / ${f(a.p99)} | ${f(o.median)} / ${f(o.p99)} |`,
    );
  }
  for (const [msg, steps] of Object.entries(share.steps)) {
    const cells = Object.entries(steps).map(([step, s]) => `${step} ${f(s.median)} (p99 ${f(s.p99)})`);
    out.push('', `Steps of "${msg}", median ms: ${cells.join(', ')}`);
  }
  out.push('');
  return out;
}

export function detailTables(rep: BenchReport): string {
  const out: string[] = [];
  const c = rep.calibration;
  if (c) {
    out.push(
      'Floors (same drivers, ms, p50 / p99):',
      '',
      `- exec of /bin/true: ${f(c.execFloor.median)} / ${f(c.execFloor.p99)}`,
      `- per-call \`ip netns exec NODE /bin/true\`: ${f(c.netnsExecWrapper.median)} / ${f(c.netnsExecWrapper.p99)} (a wrapper would add ${f(c.wrapperCostMs)} per call; the bench uses none)`,
      `- VERSION through the podwire relay (relay + socket + agent): ${f(c.podwireVersion.median)} / ${f(c.podwireVersion.p99)}`,
      `- VERSION of the reference bridge (Go binary start): ${f(c.referenceVersion.median)} / ${f(c.referenceVersion.p99)}`,
      `- ${c.options.burst} × /bin/true started at once, first exec to last exit: ${f(c.burstFloorWallMs.median)}`,
      '',
    );
  }
  out.push(
    ...shareTable(
      'Scenario 1, where a podwire call spends its time (agent log "cni call done" `ms`):',
      rep.sequential?.agent,
    ),
  );
  out.push(...shareTable('Scenario 2, the same inside bursts:', rep.burst?.agent));
  out.push(...shareTable('Scenario 4, podwire on OVS, one at a time:', rep.ovs?.sequential?.agent));
  out.push(
    ...shareTable(
      'Scenario 4, podwire on the Linux bridge beside it, one at a time:',
      rep.ovs?.sequential?.agents?.podwire,
    ),
  );
  out.push(...shareTable('Scenario 4, podwire on OVS, in bursts:', rep.ovs?.burst?.agent));
  const s3 = rep.soak;
  if (s3) {
    const samples = [s3.agentBaseline, ...s3.agentSamples];
    out.push(
      'Scenario 3, the agent during the soak (cycles: RSS MiB / open descriptors):',
      '',
      samples.map((s) => `${s.cycles}: ${(s.rssKiB / 1024).toFixed(1)} / ${s.fds}`).join(', '),
      '',
      `cycles per second: podwire ${f(s3.subjects.podwire?.cyclesPerSecond)}, reference ${f(s3.subjects.reference?.cyclesPerSecond)}`,
      '',
    );
  }
  const p = rep.scale?.subjects.podwire;
  if (p?.agentRssKiB !== undefined) {
    out.push(
      `Scenario 5: agent RSS with ${rep.scale?.options.pods} pods alive: ${(p.agentRssKiB / 1024).toFixed(1)} MiB, ${p.agentFds} descriptors`,
      '',
    );
  }
  if (rep.checks.length > 0) {
    out.push('Checks:', '');
    for (const ch of rep.checks) out.push(`- [${ch.ok ? 'x' : ' '}] ${ch.kind}: ${ch.name}: ${ch.detail}`);
    out.push('');
  }
  return out.join('\n');
}

/** The musts and targets, evaluated on whatever scenarios ran. */
export function checksOf(rep: BenchReport): Check[] {
  const checks: Check[] = [];
  const failures = (
    name: string,
    per: PerSubject<{ failures: { count: number; samples: string[] } }>,
  ): void => {
    for (const [subject, t] of Object.entries(per)) {
      checks.push({
        kind: 'must',
        name: `${name}: no failed call (${subject})`,
        ok: t.failures.count === 0,
        detail:
          t.failures.count === 0
            ? '0 failures'
            : `${t.failures.count} failures: ${t.failures.samples.join(' | ')}`,
      });
    }
  };
  const target = (name: string, p: number | undefined, ref: number | undefined, limit: number): void => {
    const x = ratio(p ?? Number.NaN, ref ?? Number.NaN);
    checks.push({ kind: 'target', name, ok: x <= limit, detail: `ratio ${r(x)} (target ≤ ${limit})` });
  };
  const s1 = rep.sequential;
  if (s1) {
    failures('scenario 1', s1.subjects);
    target(
      'ADD median ≤ 0.8 × reference',
      s1.subjects.podwire?.add.median,
      s1.subjects.reference?.add.median,
      0.8,
    );
    target(
      'DEL median ≤ 0.8 × reference',
      s1.subjects.podwire?.del.median,
      s1.subjects.reference?.del.median,
      0.8,
    );
  }
  for (const b of rep.burst?.sizes ?? []) {
    failures(`scenario 2, burst ${b.size}`, b.subjects);
    const p = b.subjects.podwire;
    const ref = b.subjects.reference;
    target(`burst ${b.size} ADD completion ≤ 0.8 × reference`, p?.addWall.median, ref?.addWall.median, 0.8);
    target(`burst ${b.size} DEL completion ≤ 0.8 × reference`, p?.delWall.median, ref?.delWall.median, 0.8);
  }
  const s3 = rep.soak;
  if (s3) {
    failures('scenario 3', s3.subjects);
    const last = s3.agentSamples[s3.agentSamples.length - 1];
    checks.push({
      kind: 'must',
      name: 'soak: agent descriptors back to baseline',
      ok: s3.fdsBackToBaseline,
      detail: `baseline ${s3.agentBaseline.fds}, end ${last?.fds}`,
    });
    checks.push({
      kind: 'must',
      name: 'soak: agent RSS within 10% of its value after the first block',
      ok: s3.rssWithin10Percent,
      detail: `end / first block = ${r(s3.rssGrowth)}`,
    });
  }
  // Scenario 4: OVS against the Linux bridge, in the same run (issue 14's targets).
  const s4 = rep.ovs?.sequential;
  if (s4) {
    failures('scenario 4, one at a time', s4.subjects);
    const o = s4.subjects['podwire-ovs'];
    const l = s4.subjects.podwire;
    target('OVS ADD median ≤ 1.3 × Linux bridge', o?.add.median, l?.add.median, 1.3);
    target('OVS DEL median ≤ 1.3 × Linux bridge', o?.del.median, l?.del.median, 1.3);
  }
  for (const b of rep.ovs?.burst?.sizes ?? []) {
    failures(`scenario 4, burst ${b.size}`, b.subjects);
    const o = b.subjects['podwire-ovs'];
    const l = b.subjects.podwire;
    target(
      `OVS burst ${b.size} ADD completion ≤ 1.5 × Linux bridge`,
      o?.addWall.median,
      l?.addWall.median,
      1.5,
    );
    target(
      `OVS burst ${b.size} DEL completion ≤ 1.5 × Linux bridge`,
      o?.delWall.median,
      l?.delWall.median,
      1.5,
    );
  }
  const s5 = rep.scale;
  if (s5) {
    failures('scenario 5', s5.subjects);
    const rss = s5.subjects.podwire?.agentRssKiB;
    checks.push({
      kind: 'target',
      name: `agent RSS < 100 MiB with ${s5.options.pods} pods`,
      ok: rss !== undefined && rss < 100 * 1024,
      detail: rss === undefined ? 'not measured' : `${(rss / 1024).toFixed(1)} MiB`,
    });
  }
  return checks;
}
