/**
 * The policy compiler's cost at issue 28's scale: 1000 pods on one node and 1000 policies (20
 * namespaces of 50 pods and 50 policies; each policy selects one app of its namespace and has two
 * ingress rules, pods of its namespace on numeric and named ports and pods of labelled namespaces,
 * and one egress rule, an ipBlock with excepts plus pods elsewhere on a named port). The target is a
 * full compile within 1 s; what a machine does is put beside a reference measured in the same run:
 * JSON-decoding the very same input once (what reading the objects costs at all), so the ratio
 * does not move with the machine's speed. Then one change as the agent compiles it (the incremental
 * compiler, decision 54): pod 0's app label changed and changed back, each beside a whole compile of
 * the same input, and the ratio of the two; the target is 50 ms for a change, compile and datapath
 * together (bench/policy-install.ts measures both).
 *
 *   node dist/bench/policy-compile.js [--pods 1000] [--policies 1000] [--runs 15]
 */
import { parseArgs } from 'node:util';
import { compilePolicies } from '../src/policy/compile.js';
import { IncrementalCompiler } from '../src/policy/incremental-compile.js';
import { policyInput, relabel } from './policy-input.js';
import { ratio, summarize } from './stats.js';

const { values } = parseArgs({
  options: { pods: { type: 'string' }, policies: { type: 'string' }, runs: { type: 'string' } },
});
const PODS = Number(values.pods ?? 1000);
const POLICIES = Number(values.policies ?? 1000);
const RUNS = Number(values.runs ?? 15);
function time(fn: () => unknown): number {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const data = policyInput(PODS, POLICIES);
const text = JSON.stringify(data);
let last = compilePolicies(data);
for (let i = 0; i < 3; i++) {
  last = compilePolicies(data);
  JSON.parse(text);
}
const compile: number[] = [];
const decode: number[] = [];
for (let i = 0; i < RUNS; i++) {
  // Alternate, so that both see the same state of the machine.
  compile.push(time(() => compilePolicies(data)));
  decode.push(time(() => JSON.parse(text)));
}
const c = summarize(compile);
const d = summarize(decode);
// One pod's label change, incrementally, each beside a whole compile of the same input.
const incremental = new IncrementalCompiler();
incremental.compile(data);
const original = data.pods[0]?.labels?.app ?? 'app0';
const change: number[] = [];
const whole: number[] = [];
let input = data;
for (let i = 0; i < RUNS * 2; i++) {
  input = relabel(input, 0, i % 2 === 0 ? `${original}-moved` : original);
  const next = input;
  change.push(time(() => incremental.compile(next)));
  whole.push(time(() => compilePolicies(next)));
}
const ch = summarize(change);
const wh = summarize(whole);
let rules = 0;
let entries = 0;
let peers = 0;
for (const p of last)
  for (const dir of [p.ingress, p.egress])
    for (const r of dir?.rules ?? []) {
      rules++;
      entries += r.entries.length;
      for (const e of r.entries) peers += e.peers === 'any' ? 1 : e.peers.length;
    }
console.log(
  JSON.stringify(
    {
      pods: PODS,
      policies: POLICIES,
      compiledPods: last.length,
      rules,
      entries,
      peerCidrs: peers,
      inputBytes: text.length,
      compileMs: c,
      jsonDecodeMs: d,
      ratioToDecode: { median: ratio(c.median, d.median), p99: ratio(c.p99, d.p99) },
      ratioToBudget1s: { median: ratio(c.median, 1000), p99: ratio(c.p99, 1000) },
      change: {
        incrementalMs: ch,
        wholeMs: wh,
        ratioToWhole: { median: ratio(ch.median, wh.median), p99: ratio(ch.p99, wh.p99) },
        ratioToBudget50ms: { median: ratio(ch.median, 50), p99: ratio(ch.p99, 50) },
        podsCompiled: incremental.stats.podsCompiled,
        podsKept: incremental.stats.podsKept,
        wholeRuns: incremental.stats.whole,
      },
    },
    null,
    2,
  ),
);
