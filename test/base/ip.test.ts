import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { PodwireError } from '../../src/base/errors.js';
import {
  formatIp,
  formatIpBytes,
  ipValueToBytes,
  parseAddressWithPrefix,
  parseIp,
  parseIpBytes,
} from '../../src/base/ip.js';
import { eui64LinkLocal, formatMac, parseMac, randomLocalMac } from '../../src/base/mac.js';

const v4 = fc.uint8Array({ minLength: 4, maxLength: 4 });
// Mostly zeros, so that runs of zero groups (the interesting case for compression) are common.
const v6 = fc
  .array(fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff })), {
    minLength: 8,
    maxLength: 8,
  })
  .map((words) => Uint8Array.from(words.flatMap((w) => [w >> 8, w & 0xff])));

describe('IP address text', () => {
  test('format -> parse is the identity', () => {
    fc.assert(
      fc.property(fc.oneof(v4, v6), (b) => {
        const ip = parseIpBytes(formatIpBytes(b));
        assert.deepStrictEqual(Uint8Array.from(ip.bytes), b);
        assert.equal(ip.family, b.length === 4 ? 4 : 6);
      }),
      { numRuns: 200 },
    );
  });

  test('IPv6 text matches the WHATWG URL serializer wherever inet_ntop does not print dotted IPv4', () => {
    fc.assert(
      fc.property(v6, (b) => {
        const text = formatIpBytes(b);
        if (text.includes('.')) return;
        assert.equal(new URL(`http://[${text}]/`).hostname, `[${text}]`);
        // And the serializer's own text for the same bytes is ours.
        const other = new URL(
          `http://[${Array.from({ length: 8 }, (_, i) => ((b[2 * i] ?? 0) << 8) | (b[2 * i + 1] ?? 0))
            .map((w) => w.toString(16))
            .join(':')}]/`,
        );
        assert.equal(other.hostname, `[${text}]`);
      }),
      { numRuns: 200 },
    );
  });

  test('known inet_ntop outputs', () => {
    const cases: [string, string][] = [
      ['0:0:0:0:0:0:0:0', '::'],
      ['0:0:0:0:0:0:0:1', '::1'],
      ['fe80:0:0:0:0:0:0:1', 'fe80::1'],
      ['fd00:0:0:1:0:0:0:0', 'fd00:0:0:1::'],
      ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
      ['1:0:2:0:3:0:4:0', '1:0:2:0:3:0:4:0'],
      ['0:0:0:0:0:ffff:a01:203', '::ffff:10.1.2.3'],
      ['0:0:0:0:0:0:a01:203', '::10.1.2.3'],
      ['2001:DB8::A', '2001:db8::a'],
    ];
    for (const [input, expected] of cases)
      assert.equal(formatIpBytes(parseIpBytes(input).bytes), expected, input);
    assert.equal(formatIpBytes(Uint8Array.of(10, 0, 0, 1)), '10.0.0.1');
  });

  test('dotted-quad text: parseIp accepts exactly what the split-and-regex parser did, with its value; formatIp prints as before', () => {
    // The parser before the character loop (issue 17), kept here as the reference.
    const reference = (text: string): bigint | undefined => {
      const parts = text.split('.');
      if (parts.length !== 4) return undefined;
      let value = 0n;
      for (const part of parts) {
        if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return undefined;
        const octet = Number(part);
        if (octet > 255) return undefined;
        value = (value << 8n) | BigInt(octet);
      }
      return value;
    };
    const piece = fc.oneof(
      fc.integer({ min: 0, max: 300 }).map(String),
      fc.constantFrom('0', '00', '01', '255', '256', '', 'a', '1a', ' 1', '-1', '999', '1e2', '0x1'),
    );
    const text = fc.oneof(
      fc.array(piece, { minLength: 1, maxLength: 6 }).map((p) => p.join('.')),
      fc.string({ unit: fc.constantFrom('0', '1', '2', '5', '9', '.', 'x', ' ') }),
    );
    fc.assert(
      fc.property(text, (t) => {
        const want = reference(t);
        const got = parseIp(t);
        assert.equal(got === undefined ? undefined : got.value, want, t);
      }),
      { numRuns: 3000 },
    );
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 40n) - 1n }), (v) => {
        const before = [24n, 16n, 8n, 0n].map((shift) => String((v >> shift) & 0xffn)).join('.');
        assert.equal(formatIp(4, v), before);
      }),
      { numRuns: 500 },
    );
  });

  test('dotted-quad text: the fast path of parseIpBytes agrees with parseIp on every string', () => {
    // Strings near IPv4 text: digits, dots, leading zeros, octets over 255, stray characters.
    const piece = fc.oneof(
      fc.integer({ min: 0, max: 300 }).map(String),
      fc.constantFrom('0', '00', '01', '255', '256', '', 'a', '1a', ' 1', '-1', '999'),
    );
    const text = fc.oneof(
      fc.array(piece, { minLength: 1, maxLength: 6 }).map((p) => p.join('.')),
      fc.string({ unit: fc.constantFrom('0', '1', '2', '5', '9', '.', ':', 'x') }),
    );
    fc.assert(
      fc.property(text, (t) => {
        const slow = parseIp(t);
        let fast: ReturnType<typeof parseIpBytes> | undefined;
        try {
          fast = parseIpBytes(t);
        } catch (err) {
          assert.ok(err instanceof PodwireError, t);
        }
        if (slow === undefined) return assert.equal(fast, undefined, t);
        assert.ok(fast, t);
        assert.equal(fast.family, slow.family, t);
        assert.deepStrictEqual(Uint8Array.from(fast.bytes), Uint8Array.from(ipValueToBytes(slow)), t);
      }),
      { numRuns: 2000 },
    );
  });

  test('invalid text is refused', () => {
    for (const bad of [
      '',
      '1.2.3',
      '1.2.3.4.5',
      '256.1.1.1',
      '01.2.3.4',
      '1::2::3',
      '1:2:3:4:5:6:7:8:9',
      ':::',
      'fe80::1%eth0',
      '1.2.3.4::',
      'g::1',
      '1:2:3:4:5:6:7:8::',
    ]) {
      assert.throws(() => parseIpBytes(bad), PodwireError, bad);
    }
  });

  test('CIDR', () => {
    assert.deepStrictEqual(parseAddressWithPrefix('10.1.0.5/24'), {
      family: 4,
      value: 0x0a010005n,
      length: 24,
    });
    assert.equal(parseAddressWithPrefix('fd00::/64')?.length, 64);
    for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', '10.0.0.0/', '10.0.0.0/a']) {
      assert.equal(parseAddressWithPrefix(bad), undefined, bad);
    }
  });
});

describe('MAC address text', () => {
  test('format -> parse is the identity; text is lower-case', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 6, maxLength: 6 }), (b) => {
        const text = formatMac(b);
        assert.equal(text, text.toLowerCase());
        assert.deepStrictEqual(Uint8Array.from(parseMac(text)), b);
      }),
      { numRuns: 100 },
    );
    assert.deepStrictEqual(
      Uint8Array.from(parseMac('02:AB:00:00:00:01')),
      Uint8Array.of(2, 0xab, 0, 0, 0, 1),
    );
    for (const bad of ['', '02:00:00:00:00', '02:00:00:00:00:00:00', '0200.0000.0001', 'zz:00:00:00:00:00']) {
      assert.throws(() => parseMac(bad), PodwireError, bad);
    }
  });
});

describe('derived MACs', () => {
  test('random MACs are locally administered unicast', () => {
    for (let i = 0; i < 50; i++) {
      const first = parseMac(randomLocalMac())[0] ?? 0;
      assert.equal(first & 0x03, 0x02);
    }
  });

  test('EUI-64 link-local as the kernel derives it', () => {
    assert.equal(eui64LinkLocal('0a:58:0a:f4:01:05'), 'fe80::858:aff:fef4:105');
    assert.equal(eui64LinkLocal('02:00:00:00:00:01'), 'fe80::ff:fe00:1');
  });
});
