import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parsePrefixOrThrow } from '../../src/base/ip.js';
import { ipBlockCidrs, rangeCidrs } from '../../src/policy/ip-block.js';

/** Whether `value` lies in the CIDR text: the test's own arithmetic. */
function inCidr(text: string, family: 4 | 6, value: bigint): boolean {
  const p = parsePrefixOrThrow(text);
  if (p.family !== family) return false;
  const bits = family === 4 ? 32 : 128;
  return value >> BigInt(bits - p.length) === p.network >> BigInt(bits - p.length);
}

describe('ipBlock: cidr minus except', () => {
  test('a /24 minus a /26 is a /25 and a /26', () => {
    assert.deepEqual(ipBlockCidrs({ cidr: '10.0.0.0/24', except: ['10.0.0.64/26'] }), [
      '10.0.0.0/26',
      '10.0.0.128/25',
    ]);
  });

  test('no except: the cidr itself; 0.0.0.0/0 and ::/0 whole', () => {
    assert.deepEqual(ipBlockCidrs({ cidr: '0.0.0.0/0', except: [] }), ['0.0.0.0/0']);
    assert.deepEqual(ipBlockCidrs({ cidr: '::/0', except: [] }), ['::/0']);
  });

  test('IPv6, nested and overlapping excepts', () => {
    assert.deepEqual(
      ipBlockCidrs({ cidr: 'fd00::/126', except: ['fd00::/127', 'fd00::1/128', 'fd00::3/128'] }),
      ['fd00::2/128'],
    );
    assert.deepEqual(ipBlockCidrs({ cidr: '::/0', except: ['8000::/1'] }), ['::/1']);
  });

  test('a single address range and the whole space split minimally', () => {
    assert.deepEqual(rangeCidrs(4, 1n, 6n), ['0.0.0.1/32', '0.0.0.2/31', '0.0.0.4/31', '0.0.0.6/32']);
    assert.deepEqual(rangeCidrs(4, 0n, (1n << 32n) - 1n), ['0.0.0.0/0']);
  });

  for (const family of [4, 6] as const) {
    const bits = family === 4 ? 32 : 128;
    const base = family === 4 ? 0x0a000000n : 0xfd00n << 112n;
    const text = (v: bigint, len: number) =>
      family === 4
        ? `${Number((v >> 24n) & 255n)}.${Number((v >> 16n) & 255n)}.${Number((v >> 8n) & 255n)}.${Number(v & 255n)}/${len}`
        : `fd00::${(v & 0xffffn).toString(16)}/${len}`;
    test(`IPv${family}: every address is in the result exactly when it is in cidr and in no except; the result is disjoint and minimal`, () => {
      const prefix = fc
        .tuple(fc.integer({ min: bits - 8, max: bits }), fc.integer({ min: 0, max: 255 }))
        .map(([len, low]) => {
          const host = (1n << BigInt(bits - len)) - 1n;
          return text((base + BigInt(low)) & ~host, len);
        });
      fc.assert(
        fc.property(
          fc.integer({ min: bits - 8, max: bits }),
          fc.array(prefix, { maxLength: 5 }),
          (len, candidates) => {
            const cidr = text(base, len);
            const outer = parsePrefixOrThrow(cidr);
            const except = candidates.filter((e) => {
              const p = parsePrefixOrThrow(e);
              return p.length > outer.length && inCidr(cidr, family, p.network);
            });
            const out = ipBlockCidrs({ cidr, except });
            for (let low = 0n; low < 256n; low++) {
              const v = base + low;
              const want = inCidr(cidr, family, v) && !except.some((e) => inCidr(e, family, v));
              const hits = out.filter((c) => inCidr(c, family, v)).length;
              assert.equal(hits, want ? 1 : 0, `${text(v, bits)} in ${cidr} minus ${except}: ${out}`);
            }
            // Minimal: no two results merge into one prefix (siblings), so no shorter cover exists.
            const ps = out.map((c) => parsePrefixOrThrow(c));
            for (const a of ps)
              for (const b of ps) {
                if (a === b || a.length !== b.length) continue;
                const size = 1n << BigInt(bits - a.length);
                const parent = a.network & ~(2n * size - 1n);
                assert.ok(
                  !(parent === (b.network & ~(2n * size - 1n)) && a.network !== b.network),
                  `${a.text} and ${b.text} should be one /${a.length - 1}`,
                );
              }
            assert.deepEqual(out, ipBlockCidrs({ cidr, except: [...except].reverse() }), 'order of except');
          },
        ),
        { numRuns: 150 },
      );
    });
  }
});
