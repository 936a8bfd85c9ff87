/**
 * The bench cannot rot: scenarios 1 and 2 with tiny counts, podwire and the reference side by side,
 * and scenario 4 (podwire on OVS and on the Linux bridge) when Open vSwitch is installed.
 * Asserts the structure of the report (every figure measured, zero failed calls, the agent's share
 * joined from its log) and that nothing is left behind; never timings.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { ovsAvailable } from '../../bed/ovs.js';
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

/** OVS daemons this process started (the bench's nodes spawn them as its children). */
function ownOvsDaemons(): string[] {
  try {
    return execFileSync('pgrep', ['-l', '-P', String(process.pid), '^ovs'])
      .toString()
      .split('\n')
      .filter((l) => l !== '');
  } catch (err) {
    if ((err as { status?: number }).status === 1) return []; // pgrep: nothing matched
    throw err;
  }
}

function assertMeasured(s: Stats | undefined, n: number, what: string): void {
  assert.ok(s, `${what}: missing`);
  assert.equal(s.n, n, `${what}: sample count`);
  assert.ok(Number.isFinite(s.median) && s.median > 0, `${what}: median ${s.median}`);
  assert.ok(s.p99 >= s.median, `${what}: p99 ${s.p99} < median ${s.median}`);
}

test('bench smoke: scenarios 1, 2 and 4, both plugins, zero failures, nothing left behind', {
  timeout: 120_000,
}, async () => {
  const report = await runBench({
    ...QUICK,
    scenarios: [1, 2, 4],
    pods: 5,
    chunk: 5,
    ovsPods: 3,
    ovsChunk: 3,
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

  const ovs = report.ovs;
  assert.ok(ovs, 'scenario 4 ran');
  if (ovsAvailable()) {
    assert.equal(ovs.skipped, undefined);
    assert.equal(ovs.figures.length, 5, 'scenario 4: 2 sequential figures, 3 for the burst of 5');
    for (const x of ovs.figures) {
      for (const v of [x.ovs.p50, x.ovs.p99, x.bridge.p50, x.bridge.p99, x.ratioP50, x.ratioP99])
        assert.ok(Number.isFinite(v) && v > 0, `${x.figure}: ${JSON.stringify(x)}`);
    }
    assertMeasured(ovs.sequential?.subjects['podwire-ovs']?.add, 3, 'scenario 4 OVS ADD');
    assertMeasured(ovs.burst?.sizes[0]?.subjects.podwire?.addCall, 5, 'scenario 4 bridge burst ADD calls');
    assert.match(mainTable(report), /\| 4\. ADD, one at a time \(3 pods\) \|/);
  } else {
    assert.match(ovs.skipped ?? '', /not installed/);
  }

  assert.ok(
    report.checks.filter((c) => c.kind === 'must').every((c) => c.ok),
    JSON.stringify(report.checks),
  );
  assert.match(mainTable(report), /\| 1\. ADD, one at a time \(5 pods\) \|/);
  assert.match(detailTables(report), /inside the agent/);
  assert.deepEqual(ownNamespaces(), [], 'the bench removed every namespace it created');
  assert.deepEqual(ownOvsDaemons(), [], 'the bench stopped every OVS daemon it started');
});
