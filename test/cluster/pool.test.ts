import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isPrefix, parsePrefix } from '../../src/base/ip.js';
import { candidates, parsePodCIDRPool, parsePool, poolHolds } from '../../src/cluster/pool.js';
import { isCode } from './watch-log.js';

describe('pod CIDR pool', () => {
  test('valid pools come back canonical, families in first-appearance order', () => {
    assert.deepEqual(parsePodCIDRPool(['FD00:10:244::/48', '10.244.0.0/16'], { ipv4: 24, ipv6: 64 }), {
      clusterCIDRs: ['fd00:10:244::/48', '10.244.0.0/16'],
      nodeCIDRMaskSize: { ipv6: 64, ipv4: 24 },
    });
    assert.deepEqual(
      parsePool(['10.1.0.0/16', 'fd00::/48', '10.2.0.0/16'], { ipv4: 24, ipv6: 64 }).families.map((f) => [
        f.family,
        f.clusterCIDRs.map((c) => c.text),
      ]),
      [
        [4, ['10.1.0.0/16', '10.2.0.0/16']],
        [6, ['fd00::/48']],
      ],
    );
  });

  test('bad pools name the key', () => {
    const cases: [unknown, unknown, RegExp][] = [
      [[], { ipv4: 24 }, /^clusterCIDRs: must be a non-empty list/],
      ['10.0.0.0/8', { ipv4: 24 }, /^clusterCIDRs: /],
      [['10.0.0.0/8', 'nope'], { ipv4: 24 }, /^clusterCIDRs\[1\]: "nope": /],
      [
        ['10.0.0.0/8', '10.1.0.0/16'],
        { ipv4: 24 },
        /^clusterCIDRs\[1\]: 10\.1\.0\.0\/16 overlaps 10\.0\.0\.0\/8/,
      ],
      [['10.0.0.0/8'], {}, /^nodeCIDRMaskSize\.ipv4: must be an integer \(clusterCIDRs has IPv4\)/],
      [['10.0.0.0/8'], { ipv4: 24.5 }, /^nodeCIDRMaskSize\.ipv4: must be an integer/],
      [['10.0.0.0/8'], { ipv4: 31 }, /^nodeCIDRMaskSize\.ipv4: 31 leaves no pod address; at most 30/],
      [['fd00::/48'], { ipv6: 127 }, /^nodeCIDRMaskSize\.ipv6: 127 leaves no pod address; at most 126/],
      [
        ['10.0.0.0/16'],
        { ipv4: 8 },
        /^nodeCIDRMaskSize\.ipv4: 8 is shorter than clusterCIDRs\[0\] 10\.0\.0\.0\/16/,
      ],
      [['10.0.0.0/16'], { ipv4: 24, ipv5: 1 }, /^nodeCIDRMaskSize\.ipv5: unknown key/],
      [['10.0.0.0/16'], [24], /^nodeCIDRMaskSize: must be a mapping/],
    ];
    for (const [cidrs, masks, re] of cases) {
      assert.throws(() => parsePodCIDRPool(cidrs, masks), isCode('ERR_INVALID_CONFIG', re), String(re));
    }
  });

  test('candidates: cluster CIDRs in order, lowest subnet first', () => {
    const pool = parsePool(['10.3.0.0/23', '10.1.0.0/24'], { ipv4: 24 }).families[0];
    assert.ok(pool !== undefined);
    assert.deepEqual(
      [...candidates(pool)].map((p) => p.text),
      ['10.3.0.0/24', '10.3.1.0/24', '10.1.0.0/24'],
    );
    const held = (t: string) => {
      const p = parsePrefix(t);
      assert.ok(isPrefix(p));
      return poolHolds(pool, p);
    };
    assert.equal(held('10.3.1.0/24'), true);
    assert.equal(held('10.3.1.0/25'), false);
    assert.equal(held('10.2.0.0/24'), false);
  });
});
