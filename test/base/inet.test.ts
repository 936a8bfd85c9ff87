import assert from 'node:assert/strict';
import { SocketAddress } from 'node:net';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { PodwireError } from '../../src/base/errors.js';
import { canonicalIp, formatIpBytes, ipToBytes } from '../../src/base/ip.js';

/** Eight 16-bit groups, biased towards zero runs and ffff so '::' and the IPv4 forms are exercised. */
const ipv6Words = fc.array(
  fc.oneof(
    { arbitrary: fc.constant(0), weight: 4 },
    { arbitrary: fc.constant(0xffff), weight: 1 },
    { arbitrary: fc.integer({ min: 0, max: 0xffff }), weight: 3 },
  ),
  { minLength: 8, maxLength: 8 },
);

function wordsToBytes(words: number[]): Buffer {
  const out = Buffer.alloc(16);
  words.forEach((w, i) => {
    out.writeUInt16BE(w, 2 * i);
  });
  return out;
}

/** inet_ntop as libuv implements it, the independent reference. */
function libuvNtop(words: number[]): string {
  return new SocketAddress({ address: words.map((w) => w.toString(16)).join(':'), family: 'ipv6' }).address;
}

function hasCode(code: string) {
  return (err: unknown) => err instanceof PodwireError && err.code === code;
}

describe('IPv6 text', () => {
  test('formatIPv6 prints what inet_ntop prints', () => {
    fc.assert(
      fc.property(ipv6Words, (words) => {
        assert.equal(formatIpBytes(wordsToBytes(words), 0, 16), libuvNtop(words));
      }),
      { numRuns: 200 },
    );
  });

  test('parseIPv6 reads canonical and non-canonical text back to the same bytes', () => {
    fc.assert(
      fc.property(ipv6Words, fc.boolean(), (words, upper) => {
        const bytes = wordsToBytes(words);
        assert.deepEqual(ipToBytes(formatIpBytes(bytes, 0, 16), 6), bytes);
        // Full form with leading zeros, in either case.
        const full = words.map((w) => w.toString(16).padStart(4, '0')).join(':');
        assert.deepEqual(ipToBytes(upper ? full.toUpperCase() : full, 6), bytes);
      }),
      { numRuns: 200 },
    );
  });

  const vectors: [string, string, string][] = [
    ['::', '00000000000000000000000000000000', '::'],
    ['::1', '00000000000000000000000000000001', '::1'],
    ['1::', '00010000000000000000000000000000', '1::'],
    ['fe80::1', 'fe800000000000000000000000000001', 'fe80::1'],
    ['2001:db8:0:0:1:0:0:1', '20010db8000000000001000000000001', '2001:db8::1:0:0:1'],
    ['2001:0db8::0001:0000', '20010db8000000000000000000010000', '2001:db8::1:0'],
    ['2001:db8:1:1:1:1:0:1', '20010db8000100010001000100000001', '2001:db8:1:1:1:1:0:1'],
    ['::ffff:10.1.2.3', '00000000000000000000ffff0a010203', '::ffff:10.1.2.3'],
    ['64:ff9b::192.0.2.1', '0064ff9b0000000000000000c0000201', '64:ff9b::c000:201'],
    ['FD00:10:244::5', 'fd000010024400000000000000000005', 'fd00:10:244::5'],
  ];
  for (const [text, hex, canonical] of vectors) {
    test(`${text} <-> ${canonical}`, () => {
      assert.equal(ipToBytes(text, 6).toString('hex'), hex);
      assert.equal(formatIpBytes(Buffer.from(hex, 'hex'), 0, 16), canonical);
      assert.equal(canonicalIp(text), canonical);
    });
  }

  for (const bad of [
    '',
    'fe80::1%eth0',
    '1:2:3:4:5:6:7:8:9',
    ':::',
    '1::2::3',
    '10.0.0.1',
    'g::1',
    '12345::',
  ]) {
    test(`rejects ${JSON.stringify(bad)}`, () => {
      assert.throws(() => ipToBytes(bad, 6), hasCode('ERR_INVALID_CONFIG'));
    });
  }

  test('formatIPv6 reads at an offset and refuses to read past the end', () => {
    const buf = Buffer.concat([Buffer.from([9, 9]), ipToBytes('fd00::5', 6)]);
    assert.equal(formatIpBytes(buf, 2, 16), 'fd00::5');
    assert.throws(() => formatIpBytes(buf, 3, 16), hasCode('ERR_INTERNAL'));
  });
});

describe('IPv4 text', () => {
  test('parse and format are inverse', () => {
    fc.assert(
      fc.property(fc.ipV4(), (text) => {
        const bytes = ipToBytes(text, 4);
        assert.equal(bytes.length, 4);
        assert.equal(formatIpBytes(bytes, 0, 4), text);
      }),
      { numRuns: 200 },
    );
  });

  for (const bad of ['', '1.2.3', '1.2.3.4.5', '256.1.1.1', '01.2.3.4', '1.2.3.4/24', '::1']) {
    test(`rejects ${JSON.stringify(bad)}`, () => {
      assert.throws(() => ipToBytes(bad, 4), hasCode('ERR_INVALID_CONFIG'));
    });
  }
});
