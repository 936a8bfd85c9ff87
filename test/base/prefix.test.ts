import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  canonicalIp,
  formatIp,
  isPrefix,
  normalizeIp,
  type Prefix,
  parseIp,
  parsePrefix,
  prefixContains,
  prefixesOverlap,
  subnets,
} from '../../src/base/ip.js';

const v4 = fc.bigInt({ min: 0n, max: (1n << 32n) - 1n });
const v6 = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n });
/** IPv6 values with long zero runs, where canonical compression matters. */
const v6sparse = fc
  .array(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff })), { minLength: 8, maxLength: 8 })
  .map((groups) => groups.reduce((v, g) => (v << 16n) | BigInt(g), 0n));

function prefix(text: string): Prefix {
  const p = parsePrefix(text);
  assert.ok(isPrefix(p), text);
  return p;
}

describe('cluster prefix arithmetic', () => {
  test('addresses: format agrees with the IPAM layer, and parse inverts it', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          v4.map((v) => [4, v] as const),
          v6.map((v) => [6, v] as const),
          v6sparse.map((v) => [6, v] as const),
        ),
        ([family, value]) => {
          const text = formatIp(family, value);
          assert.equal(text, canonicalIp(text));
          assert.deepEqual(parseIp(text), { family, value });
          assert.deepEqual(parseIp(text), { family, value });
        },
      ),
      { numRuns: 200 },
    );
  });

  test('addresses: other spellings are canonicalised; non-addresses refused', () => {
    assert.equal(normalizeIp('FD00:0:0::0A'), 'fd00::a');
    assert.equal(normalizeIp('::ffff:1.2.3.4'), '::ffff:1.2.3.4'); // one canonical form: mixed notation
    assert.equal(normalizeIp('2001:db8:0:0:1:0:0:1'), '2001:db8::1:0:0:1');
    for (const bad of ['', '1.2.3', '01.2.3.4', '1.2.3.256', 'fe80::1%eth0', '[::1]', 'x', '1::2::3']) {
      assert.equal(normalizeIp(bad), undefined, bad);
    }
  });

  test('prefixes: errors say why', () => {
    assert.deepEqual(parsePrefix('10.0.0.1/8'), { error: 'host bits are set (did you mean 10.0.0.0/8?)' });
    assert.deepEqual(parsePrefix('10.0.0.0'), { error: 'missing "/prefix-length"' });
    assert.deepEqual(parsePrefix('10.0.0.0/33'), { error: 'prefix length must be an integer from 0 to 32' });
    assert.deepEqual(parsePrefix('::/08'), { error: 'prefix length must be an integer from 0 to 128' });
    assert.equal(prefix('FD00:10:244::/48').text, 'fd00:10:244::/48');
  });

  test('subnets: in order, aligned, inside, and as many as 2^(mask - length)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 8, max: 30 }),
        fc.integer({ min: 0, max: 6 }),
        v4,
        (length, extra, value) => {
          const mask = Math.min(32, length + extra);
          const outer = prefix(`${formatIp(4, value & ~((1n << BigInt(32 - length)) - 1n))}/${length}`);
          const all = [...subnets(outer, mask)];
          assert.equal(all.length, 2 ** (mask - length));
          for (const [i, s] of all.entries()) {
            assert.ok(prefixContains(outer, s));
            assert.equal(s.length, mask);
            if (i > 0) assert.ok(s.network > (all[i - 1] as Prefix).network);
          }
        },
      ),
      { numRuns: 100 },
    );
    const first = subnets(prefix('fd00::/32'), 64).next().value as Prefix;
    assert.equal(first.text, 'fd00::/64');
  });

  test('containment and overlap', () => {
    assert.ok(prefixContains(prefix('10.0.0.0/8'), prefix('10.1.0.0/16')));
    assert.ok(!prefixContains(prefix('10.1.0.0/16'), prefix('10.0.0.0/8')));
    assert.ok(prefixesOverlap(prefix('10.1.0.0/16'), prefix('10.0.0.0/8')));
    assert.ok(!prefixesOverlap(prefix('10.1.0.0/16'), prefix('10.2.0.0/16')));
    assert.ok(!prefixesOverlap(prefix('0.0.0.0/0'), prefix('::/0')));
  });
});
