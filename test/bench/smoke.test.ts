/**
 * The bench cannot rot: scenarios 1 and 2 with tiny counts, podwire and the reference side by side.
 * Asserts the structure of the report (every figure measured, zero failed calls, the agent's share
 * joined from its log) and that nothing is left behind; never timings.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { QUICK, runBench } from '../../bench/bench.js';
import { detailTables, mainTable } from '../../bench/report.js';
import type { BurstSubject } from '../../bench/scenarios/burst.js';
import type { SequentialSubject } from '../../bench/scenarios/sequential.js';
import type { Stats } from '../../bench/stats.js';

function ownNamespaces(): string[] {
  return execFileSync('ip', ['netns', 'list'])
    .toString()
    .split('\n')
    .filter((l) => l.startsWith(`pwt-${process.pid}-`));
}

function assertMeasured(s: Stats | undefined, n: number, what: string): void {
  assert.ok(s, `${what}: missing`);
  assert.equal(s.n, n, `${what}: sample count`);
  assert.ok(Number.isFinite(s.median) && s.median > 0, `${what}: median ${s.median}`);
  assert.ok(s.p99 >= s.median, `${what}: p99 ${s.p99} < median ${s.median}`);
}

test('bench smoke: scenarios 1 and 2, both plugins, zero failures, nothing left behind', {
  timeout: 120_000,
}, async () => {
  const report = await runBench({
    ...QUICK,
    scenarios: [1, 2],
    pods: 5,
    chunk: 5,
    burstSizes: [5],
    burstReps: 1,
    deadlineMs: 100_000,
    handleSignals: false,
  });

  const s1 = report.sequential;
  assert.ok(s1, 'scenario 1 ran');
  for (const name of ['podwire', 'reference'] as const) {
    const t: SequentialSubject | undefined = s1.subjects[name];
    assert.ok(t, `scenario 1: ${name} measured`);
    assertMeasured(t.add, 5, `scenario 1 ${name} ADD`);
    assertMeasured(t.del, 5, `scenario 1 ${name} DEL`);
    assert.equal(t.failures.count, 0, t.failures.samples.join('\n'));
  }
  assertMeasured(s1.agent?.agentMs.ADD, 5, "agent's own ADD time");
  assertMeasured(s1.agent?.agentMs.DEL, 5, "agent's own DEL time");

  const burst = report.burst?.sizes[0];
  assert.equal(burst?.size, 5, 'scenario 2 ran a burst of 5');
  for (const name of ['podwire', 'reference'] as const) {
    const t: BurstSubject | undefined = burst.subjects[name];
    assert.ok(t, `scenario 2: ${name} measured`);
    assertMeasured(t.addWall, 1, `burst ${name} ADD completion`);
    assertMeasured(t.delWall, 1, `burst ${name} DEL completion`);
    assertMeasured(t.addCall, 5, `burst ${name} ADD calls`);
    assert.equal(t.failures.count, 0, t.failures.samples.join('\n'));
  }

  assert.ok(
    report.checks.filter((c) => c.kind === 'must').every((c) => c.ok),
    JSON.stringify(report.checks),
  );
  assert.match(mainTable(report), /\| 1\. ADD, one at a time \(5 pods\) \|/);
  assert.match(detailTables(report), /inside the agent/);
  assert.deepEqual(ownNamespaces(), [], 'the bench removed every namespace it created');
});
