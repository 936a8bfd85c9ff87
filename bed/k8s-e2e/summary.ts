/**
 * The e2e run's account: every test the focus selected, as passed, failed (unexpectedly), failed as
 * expected (an `expectedFailures` entry, e.g. NetworkPolicy until podwire implements it), passed
 * although expected to fail, or skipped with its reason (the test list's, or the e2e's own when a
 * test skips itself at run time). Only unexpected failures fail the run; a test that did not run
 * at all (the run was cut short) is counted as such and fails it too.
 */
import type { TestCase } from './junit.js';
import { type Entry, matching } from './tests.js';

export interface Summary {
  selected: number;
  ran: number;
  passed: string[];
  failed: TestCase[];
  expectedFailed: { test: TestCase; reason: string }[];
  expectedPassed: string[];
  /** Skipped by the list (with its reason) or by the e2e itself. */
  skipped: { name: string; reason: string }[];
  /** Selected, neither skipped by the list nor reported: the run stopped before them. */
  missing: string[];
  seconds: number;
}

export const SELF_SKIP = 'skipped by the e2e itself at run time (see its log)';

/**
 * selected: the names the focus selects (dry run); skips: the skips in force; cases: what the JUnit
 * reports say. A name reported more than once (by each parallel node; in both passes) counts once,
 * by its report that is not a skip, or else by its longest skip.
 */
export function summarize(
  selected: readonly string[],
  skips: readonly Entry[],
  expected: readonly Entry[],
  cases: readonly TestCase[],
): Summary {
  const byName = new Map<string, TestCase>();
  for (const c of cases) {
    const prev = byName.get(c.name);
    if (
      prev === undefined ||
      (prev.outcome === 'skipped' && (c.outcome !== 'skipped' || c.seconds > prev.seconds))
    ) {
      byName.set(c.name, c);
    }
  }
  const s: Summary = {
    selected: selected.length,
    ran: 0,
    passed: [],
    failed: [],
    expectedFailed: [],
    expectedPassed: [],
    skipped: [],
    missing: [],
    seconds: 0,
  };
  for (const name of selected) {
    const skip = matching(skips, name);
    const c = byName.get(name);
    if (c !== undefined) s.seconds += c.seconds;
    if (skip !== undefined && (c === undefined || c.outcome === 'skipped')) {
      s.skipped.push({ name, reason: skip.reason });
      continue;
    }
    // ginkgo v1 reports a test it never reached (the run interrupted) as skipped, in no time; one that
    // skipped itself has spent time in its setup.
    if (c === undefined || (c.outcome === 'skipped' && c.seconds === 0)) {
      s.missing.push(name);
      continue;
    }
    if (c.outcome === 'skipped') {
      s.skipped.push({ name, reason: SELF_SKIP });
      continue;
    }
    s.ran++;
    const xf = matching(expected, name);
    if (c.outcome === 'passed') (xf ? s.expectedPassed : s.passed).push(name);
    else if (xf) s.expectedFailed.push({ test: c, reason: xf.reason });
    else s.failed.push(c);
  }
  return s;
}

/** The run fails on an unexpected failure or a selected test that never ran. */
export function succeeded(s: Summary): boolean {
  return s.failed.length === 0 && s.missing.length === 0;
}

export function formatSummary(s: Summary): string {
  const out: string[] = [];
  const reasons = new Map<string, number>();
  for (const k of s.skipped) reasons.set(k.reason, (reasons.get(k.reason) ?? 0) + 1);
  out.push(
    `e2e [sig-network]: ${s.selected} selected, ${s.ran} ran: ${s.passed.length} passed, ${s.failed.length} failed, ` +
      `${s.expectedFailed.length} expected failures, ${s.expectedPassed.length} passed though expected to fail; ` +
      `${s.skipped.length} skipped; ${s.missing.length} did not run (${Math.round(s.seconds)} s in tests)`,
  );
  out.push('skipped:');
  for (const [reason, n] of [...reasons].sort((a, b) => b[1] - a[1])) out.push(`  ${n} × ${reason}`);
  if (s.expectedFailed.length > 0) {
    out.push(
      `expected failures (${s.expectedFailed[0]?.reason}${s.expectedFailed.length > 1 ? ', …' : ''}):`,
    );
    for (const x of s.expectedFailed) out.push(`  ${x.test.name}`);
  }
  if (s.expectedPassed.length > 0) {
    out.push('passed though expected to fail:');
    for (const n of s.expectedPassed) out.push(`  ${n}`);
  }
  if (s.missing.length > 0) {
    out.push('did not run (the run stopped first):');
    for (const n of s.missing) out.push(`  ${n}`);
  }
  if (s.failed.length > 0) {
    out.push('UNEXPECTED FAILURES:');
    for (const f of s.failed) {
      out.push(`  ${f.name}`);
      const first = (f.failure ?? '').split('\n').find((l) => l.trim() !== '') ?? '';
      if (first !== '') out.push(`    ${first.trim().slice(0, 300)}`);
    }
  }
  return out.join('\n');
}
