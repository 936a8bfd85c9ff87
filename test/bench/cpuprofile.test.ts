/** The bench's profile summariser and statistics, on small hand-made inputs. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type CpuProfile, summarizeProfile } from '../../bench/cpuprofile.js';
import { median, percentile, summarize } from '../../bench/stats.js';

const SRC = 'file:///work/main/dist/src';

/** root → dispatch → encode (netlink), root → idle; dispatch → stringify (JSON builtin). */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 }, children: [2, 3] },
    {
      id: 2,
      callFrame: { functionName: 'handle', url: `${SRC}/agent/cni-dispatch.js`, lineNumber: 9 },
      children: [4, 5],
    },
    { id: 3, callFrame: { functionName: '(idle)', url: '', lineNumber: -1 } },
    { id: 4, callFrame: { functionName: 'encode', url: `${SRC}/kernel/netlink/codec.js`, lineNumber: 0 } },
    { id: 5, callFrame: { functionName: 'stringify', url: '', lineNumber: -1 } },
  ],
  startTime: 0,
  endTime: 10_000,
  samples: [3, 4, 4, 2, 5, 3],
  timeDeltas: [5000, 1000, 1000, 1000, 1000, 1000],
};

describe('summarizeProfile', () => {
  const s = summarizeProfile(profile);

  test('splits idle from busy time', () => {
    assert.equal(s.wallMs, 10);
    assert.equal(s.idleMs, 6);
    assert.equal(s.busyMs, 4);
  });

  test('self time by area and by function, in percent of busy time', () => {
    assert.deepEqual(
      s.selfByArea.map((e) => [e.name, e.ms, e.pct]),
      [
        ['src/kernel/netlink (rtnetlink codec, socket)', 2, 50],
        ['src/agent', 1, 25],
        ['JSON (builtin)', 1, 25],
      ],
    );
    assert.equal(s.selfByFunction[0]?.ms, 2);
    assert.match(s.selfByFunction[0]?.name ?? '', /^encode .*codec\.js:1$/);
  });

  test('total time counts a function for every sample under it', () => {
    const handle = s.totalByFunction.find((e) => e.name.startsWith('handle '));
    assert.equal(handle?.ms, 4);
  });
});

describe('stats', () => {
  test('nearest-rank p99 and the median of small samples', () => {
    assert.equal(percentile([1, 2, 3], 0.99), 3);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.deepEqual(summarize([3, 1, 2]), { n: 3, median: 2, p99: 3, min: 1, max: 3, mean: 2 });
  });

  test('min ≤ median ≤ p99 ≤ max for any sample', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 1e4, noNaN: true }), { minLength: 1, maxLength: 300 }),
        (xs) => {
          const s = summarize(xs);
          return s.min <= s.median && s.median <= s.p99 && s.p99 <= s.max;
        },
      ),
      { numRuns: 200 },
    );
  });
});
