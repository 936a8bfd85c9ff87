/**
 * The upstream e2e's test list (bed/k8s-e2e/tests.yaml) and the pieces of the runner that need no
 * cluster: the list parses strictly, every entry has a reason, and, when scripts/k8s-build.sh has
 * built the e2e binary, every pattern names at least one real test, ginkgo (RE2) skips exactly what
 * JavaScript's reading of the same patterns skips, and every NetworkPolicy enforcement test stays
 * in the run (as an expected failure) unless it needs SCTP. The JUnit reader and the summary are
 * checked on reports shaped as ginkgo v1 writes them.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { dryRunNames, k8sBinDir } from '../../bed/k8s-e2e/e2e-binary.js';
import { parseJUnit } from '../../bed/k8s-e2e/junit.js';
import { formatSummary, SELF_SKIP, succeeded, summarize } from '../../bed/k8s-e2e/summary.js';
import { activeSkips, alternation, loadTestList, matching, parseTestList } from '../../bed/k8s-e2e/tests.js';

const FOCUS = '\\[sig-network\\]';

describe('the test list', () => {
  const tests = loadTestList();

  test('every skip and expected failure has a reason; there is a subset', () => {
    assert.ok(tests.skip.length > 0);
    assert.ok(tests.subset.length > 0);
    for (const e of [...tests.skip, ...tests.expectedFailures]) assert.ok(e.reason.length >= 10, e.pattern);
  });

  test('a malformed list is refused, naming the entry', () => {
    const bad: [string, RegExp][] = [
      ["skip:\n  - pattern: 'x'\n", /skip\[0\] \(x\): no reason/],
      ["skip:\n  - pattern: 'x'\n    reason: '  '\n", /skip\[0\] \(x\): no reason/],
      [
        "skip:\n  - pattern: '(x'\n    reason: because\n",
        /skip\[0\]: pattern \(x is not a regular expression/,
      ],
      ["skip:\n  - pattern: 'a(?!b)'\n    reason: because\n", /not RE2/],
      ["skip:\n  - pattern: 'x'\n    reason: because\n    why: no\n", /skip\[0\]: unknown key why/],
      [
        "skip:\n  - pattern: 'x'\n    reason: because\n    unless: ipv6\n",
        /unless must be one of dual-stack/,
      ],
      [
        "expectedFailures:\n  - pattern: 'x'\n    reason: because\n    unless: dual-stack\n",
        /unknown key unless/,
      ],
      ["subset:\n  - ''\n", /subset\[0\]: pattern must be a non-empty string/],
      ["subset:\n  - '^x'\n", /subset\[0\]: pattern \^x is anchored with \^/],
      ['skips: []\n', /unknown key skips/],
      ['skip: x\n', /skip: not a list/],
    ];
    for (const [text, message] of bad) assert.throws(() => parseTestList(text), message, text);
  });

  test('a skip with `unless` is lifted on a cluster with that capability', () => {
    const dual = tests.skip.filter((e) => e.unless === 'dual-stack');
    assert.ok(dual.length > 0);
    assert.equal(activeSkips(tests, new Set()).length, tests.skip.length);
    assert.equal(activeSkips(tests, new Set(['dual-stack'])).length, tests.skip.length - dual.length);
  });
});

const bin = k8sBinDir();

describe('the test list against the e2e binary', {
  skip: bin === undefined && 'no e2e binary (scripts/k8s-build.sh)',
}, () => {
  const e2e = join(bin ?? '', 'e2e.test');
  const tests = loadTestList();
  let all: Promise<string[]> | undefined;
  const focused = () => {
    all ??= dryRunNames(e2e, FOCUS);
    return all;
  };

  test('every pattern matches at least one [sig-network] test', async () => {
    const names = await focused();
    assert.ok(names.length > 100, `only ${names.length} tests`);
    for (const p of [...tests.skip, ...tests.expectedFailures].map((e) => e.pattern).concat(tests.subset)) {
      assert.ok(
        names.some((n) => new RegExp(p).test(n)),
        `${p} matches no test`,
      );
    }
  });

  test('ginkgo skips exactly the tests the list skips (RE2 reads the patterns as JavaScript does)', async () => {
    const names = await focused();
    for (const caps of [new Set<'dual-stack'>(), new Set(['dual-stack'] as const)]) {
      const skips = activeSkips(tests, caps);
      const kept = await dryRunNames(e2e, FOCUS, alternation(skips.map((e) => e.pattern)));
      const expected = names.filter((n) => matching(skips, n) === undefined);
      assert.deepEqual(kept, expected);
      assert.ok(kept.length > 50 && kept.length < names.length);
    }
  });

  test('the NetworkPolicy enforcement tests run and must pass, unless they need SCTP', async () => {
    const names = await focused();
    const skips = activeSkips(tests, new Set());
    const policy = names.filter((n) => n.includes('[Feature:NetworkPolicy]'));
    assert.ok(policy.length > 20);
    for (const n of policy) {
      const skip = matching(skips, n);
      if (skip !== undefined) assert.match(skip.reason, /SCTP/, n);
      assert.equal(matching(tests.expectedFailures, n), undefined, `${n} is an expected failure`);
    }
  });
});

const REPORT = `<?xml version="1.0" encoding="UTF-8"?>
  <testsuite name="Kubernetes e2e suite" tests="5" failures="2" errors="0" time="30.5">
      <testcase name="[sig-network] A passes" classname="Kubernetes e2e suite" time="10.25">
      </testcase>
      <testcase name="[sig-network] B fails &amp; &#34;says so&#34;" classname="Kubernetes e2e suite" time="20">
          <failure type="Failure" message="/x.go:1&#xA;timed out">/x.go:1&#xA;timed out waiting &lt;pod&gt;</failure>
          <system-out>log</system-out>
      </testcase>
      <testcase name="[sig-network] NetworkPolicy C" classname="Kubernetes e2e suite" time="0.25">
          <failure type="Failure" message="no policy"></failure>
      </testcase>
      <testcase name="[sig-network] D is skipped" classname="Kubernetes e2e suite" time="0">
          <skipped></skipped>
      </testcase>
      <testcase name="[sig-network] E skips itself" classname="Kubernetes e2e suite" time="1.5"><skipped/></testcase>
      <testcase name="[sig-network] F never ran" classname="Kubernetes e2e suite" time="0"><skipped/></testcase>
  </testsuite>`;

describe('the JUnit reports and the summary', () => {
  test('ginkgo v1 JUnit: outcomes, times, decoded names and failure messages', () => {
    const cases = parseJUnit(REPORT);
    assert.deepEqual(
      cases.map((c) => [c.name, c.outcome, c.seconds]),
      [
        ['[sig-network] A passes', 'passed', 10.25],
        ['[sig-network] B fails & "says so"', 'failed', 20],
        ['[sig-network] NetworkPolicy C', 'failed', 0.25],
        ['[sig-network] D is skipped', 'skipped', 0],
        ['[sig-network] E skips itself', 'skipped', 1.5],
        ['[sig-network] F never ran', 'skipped', 0],
      ],
    );
    assert.equal(cases[1]?.failure, '/x.go:1\ntimed out\n/x.go:1\ntimed out waiting <pod>');
    assert.throws(() => parseJUnit('<html></html>'), /not a JUnit report/);
  });

  test('only unexpected failures and tests that never ran fail the run', () => {
    const tests = parseTestList(
      [
        'skip:',
        "  - pattern: ' D '",
        '    reason: D needs a cloud',
        'expectedFailures:',
        "  - pattern: 'NetworkPolicy'",
        '    reason: no NetworkPolicy yet',
      ].join('\n'),
    );
    const selected = [
      '[sig-network] A passes',
      '[sig-network] B fails & "says so"',
      '[sig-network] NetworkPolicy C',
      '[sig-network] D is skipped',
      '[sig-network] E skips itself',
    ];
    const cases = parseJUnit(REPORT);
    const s = summarize(selected, tests.skip, tests.expectedFailures, cases);
    assert.equal(s.ran, 3);
    assert.deepEqual(s.passed, ['[sig-network] A passes']);
    assert.deepEqual(
      s.failed.map((c) => c.name),
      ['[sig-network] B fails & "says so"'],
    );
    assert.deepEqual(
      s.expectedFailed.map((x) => x.test.name),
      ['[sig-network] NetworkPolicy C'],
    );
    assert.deepEqual(s.skipped, [
      { name: '[sig-network] D is skipped', reason: 'D needs a cloud' },
      { name: '[sig-network] E skips itself', reason: SELF_SKIP },
    ]);
    assert.equal(succeeded(s), false);
    assert.match(formatSummary(s), /UNEXPECTED FAILURES:\n {2}\[sig-network\] B fails/);

    // Without B's failure the run succeeds; a selected test missing from the reports fails it.
    const ok = summarize(
      selected,
      tests.skip,
      tests.expectedFailures,
      cases.filter((c) => !c.name.includes(' B ')),
    );
    assert.deepEqual(ok.missing, ['[sig-network] B fails & "says so"']);
    assert.equal(succeeded(ok), false);
    // A test reported skipped in no time was never reached (ginkgo v1, interrupted): not run.
    const cut = summarize(
      [...selected, '[sig-network] F never ran'],
      tests.skip,
      tests.expectedFailures,
      cases,
    );
    assert.deepEqual(cut.missing, ['[sig-network] F never ran']);
    const all = summarize(
      selected.filter((n) => !n.includes(' B ')),
      tests.skip,
      tests.expectedFailures,
      cases,
    );
    assert.equal(succeeded(all), true);
    assert.match(formatSummary(all), /1 expected failures/);
  });
});
