import assert from 'node:assert/strict';
import { BlockList, isIP } from 'node:net';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { PodwireError } from '../../src/base/errors.js';
import { canonicalIp, formatIp, parseIp } from '../../src/base/ip.js';
import { parseCidr } from '../../src/ipam/cidr.js';

const RUNS = { numRuns: 200 };

/** An IPv6 value built from groups that are often zero, so that "::" runs of every length occur. */
const ipv6Value = fc
  .array(fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff })), {
    minLength: 8,
    maxLength: 8,
  })
  .map((groups) => groups.reduce((v, g) => (v << 16n) | BigInt(g), 0n));
const ipv4Value = fc.bigInt({ min: 0n, max: 2n ** 32n - 1n });

/** A CIDR small enough to iterate: IPv4 /22../30, IPv6 /118../126, at a random network. */
const smallCidr = fc.oneof(
  fc.tuple(fc.constant(4 as const), ipv4Value, fc.integer({ min: 22, max: 30 })),
  fc.tuple(fc.constant(6 as const), ipv6Value, fc.integer({ min: 118, max: 126 })),
);

/** Any valid CIDR of either family. */
const anyCidr = fc.oneof(
  fc.tuple(fc.constant(4 as const), ipv4Value, fc.integer({ min: 0, max: 30 })),
  fc.tuple(fc.constant(6 as const), ipv6Value, fc.integer({ min: 0, max: 126 })),
);

function cidrText([family, value, prefix]: [4 | 6, bigint, number]): string {
  const bits = family === 4 ? 32 : 128;
  const network = (value >> BigInt(bits - prefix)) << BigInt(bits - prefix);
  return `${formatIp(family, network)}/${prefix}`;
}

/** The WHATWG URL serialiser's text of an IPv6 address (RFC 5952 compressed, lower case). */
function urlCanonical(ip: string): string {
  return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
}

/** The fully expanded, upper-case spelling of an IPv6 value. */
function expanded(value: bigint): string {
  const groups: string[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n)
    groups.push(((value >> shift) & 0xffffn).toString(16).toUpperCase().padStart(4, '0'));
  return groups.join(':');
}

function invalidConfig(text: string): (err: unknown) => boolean {
  return (err) =>
    err instanceof PodwireError && err.code === 'ERR_INVALID_CONFIG' && err.message.includes(text);
}

describe('IPv6 text', () => {
  test('canonical text is what node:net and the URL serialiser accept and produce', () => {
    fc.assert(
      fc.property(ipv6Value, (value) => {
        const text = formatIp(6, value);
        assert.equal(isIP(text), 6);
        // The one canonical form writes IPv4-mapped and -compatible addresses dotted (as inet_ntop does);
        // everywhere else it is the URL serialiser's text.
        if (!text.includes('.')) assert.equal(text, urlCanonical(expanded(value)));
        assert.deepEqual(parseIp(text), { family: 6, value });
        assert.deepEqual(parseIp(expanded(value)), { family: 6, value });
        assert.equal(canonicalIp(expanded(value)), text);
        const list = new BlockList();
        list.addAddress(text, 'ipv6');
        assert.ok(list.check(expanded(value), 'ipv6'));
      }),
      RUNS,
    );
  });

  test('RFC 5952 examples', () => {
    assert.equal(canonicalIp('2001:0db8:0000:0000:0000:0000:0000:0001'), '2001:db8::1');
    assert.equal(canonicalIp('2001:db8:0:0:1:0:0:1'), '2001:db8::1:0:0:1'); // first of equal runs
    assert.equal(canonicalIp('2001:db8:0:1:1:1:1:1'), '2001:db8:0:1:1:1:1:1'); // no "::" for one group
    assert.equal(canonicalIp('2001:0:0:1:0:0:0:1'), '2001:0:0:1::1'); // the longest run
    assert.equal(canonicalIp('::'), '::');
    assert.equal(canonicalIp('::1'), '::1');
    assert.equal(canonicalIp('1::'), '1::');
    // IPv4-mapped in mixed notation (RFC 5952 section 5), as inet_ntop and `ip` print it.
    assert.equal(canonicalIp('::ffff:10.1.2.3'), '::ffff:10.1.2.3');
  });

  test('bad addresses are refused', () => {
    for (const bad of [
      '',
      ':',
      ':::',
      '1:2:3:4:5:6:7',
      '1:2:3:4:5:6:7:8:9',
      '1::2::3',
      '12345::',
      'g::',
      '1:2:3:4:5:6:7::8',
      '::1.2.3',
      'fe80::1%eth0',
      '[::1]',
    ]) {
      assert.equal(parseIp(bad), undefined, bad);
      assert.equal(isIP(bad) === 6 && !bad.includes('%'), false, `node:net accepts ${bad}`);
    }
    for (const bad of ['1.2.3', '1.2.3.4.5', '256.1.1.1', '01.2.3.4', '1.2.3.-4', ' 1.2.3.4', '1.2.3.4 ']) {
      assert.equal(parseIp(bad), undefined, bad);
    }
  });
});

describe('parseCidr', () => {
  test('IPv4 /24: network, gateway, broadcast, hosts', () => {
    const c = parseCidr('10.244.1.0/24');
    assert.equal(c.family, 4);
    assert.equal(c.text, '10.244.1.0/24');
    assert.equal(c.prefixLength, 24);
    assert.equal(c.format(c.network), '10.244.1.0');
    assert.equal(c.format(c.gateway), '10.244.1.1');
    assert.equal(c.format(c.firstHost), '10.244.1.1');
    assert.equal(c.format(c.lastHost), '10.244.1.254');
    assert.equal(c.broadcast === undefined ? undefined : c.format(c.broadcast), '10.244.1.255');
    assert.equal(c.assignableCount, 253n);
    assert.ok(c.contains('10.244.1.77'));
    assert.ok(!c.contains('10.244.2.0'));
    assert.ok(!c.contains('::ffff:10.244.1.77'));
    assert.ok(!c.contains('nonsense'));
  });

  test('IPv6 /64 in canonical form, no broadcast', () => {
    const c = parseCidr('FD00:0010:0244:0001::/64');
    assert.equal(c.family, 6);
    assert.equal(c.text, 'fd00:10:244:1::/64');
    assert.equal(c.format(c.gateway), 'fd00:10:244:1::1');
    assert.equal(c.format(c.lastHost), 'fd00:10:244:1:ffff:ffff:ffff:ffff');
    assert.equal(c.broadcast, undefined);
    assert.equal(c.assignableCount, 2n ** 64n - 2n);
    assert.ok(c.contains('fd00:10:244:1:abcd::1'));
    assert.ok(!c.contains('10.244.1.1'));
  });

  test('the smallest ranges keep one assignable address', () => {
    const v4 = parseCidr('10.0.0.4/30');
    assert.deepEqual(
      [...v4.assignable()].map((v) => v4.format(v)),
      ['10.0.0.6'],
    );
    const v6 = parseCidr('fd00::/126');
    assert.deepEqual(
      [...v6.assignable()].map((v) => v6.format(v)),
      ['fd00::2', 'fd00::3'],
    );
  });

  test('bad CIDRs are refused with ERR_INVALID_CONFIG naming the value', () => {
    for (const bad of [
      '10.244.1.1/24', // host bits
      'fd00:10:244:1::1/64',
      '10.0.0.0/31', // too small
      '10.0.0.0/32',
      'fd00::/127',
      'fd00::/128',
      '10.0.0.0/33',
      'fd00::/129',
      '10.0.0.0/024',
      '10.0.0.0/',
      '10.0.0.0',
      '10.0.0/24',
      '/24',
      'fd00::/64/1',
      'fd00::/-1',
      'fd00::/ 64',
      '',
    ]) {
      assert.throws(() => parseCidr(bad, 'podCIDR'), invalidConfig(JSON.stringify(bad)), bad);
    }
    assert.throws(() => parseCidr('10.244.1.1/24'), /did you mean 10\.244\.1\.0\/24/);
  });

  test('canonical text round-trips and contains agrees with node:net BlockList', () => {
    fc.assert(
      fc.property(anyCidr, ipv6Value, ipv4Value, (spec, probe6, probe4) => {
        const text = cidrText(spec);
        const c = parseCidr(text);
        assert.equal(c.text, text);
        assert.equal(parseCidr(c.text).text, text);
        const list = new BlockList();
        const type = c.family === 4 ? 'ipv4' : 'ipv6';
        list.addSubnet(c.format(c.network), c.prefixLength, type);
        for (const v of [
          probe4,
          probe6,
          c.network,
          c.gateway,
          c.lastHost,
          c.network + c.size - 1n,
          c.network + c.size,
        ]) {
          if (c.family === 4 && v >= 2n ** 32n) continue;
          if (v >= 2n ** 128n) continue;
          const ip = formatIp(c.family, v);
          assert.equal(c.contains(ip), list.check(ip, type), `${ip} in ${text}`);
        }
      }),
      RUNS,
    );
  });

  test('iteration from any offset yields every assignable address once, wrapping around', () => {
    fc.assert(
      fc.property(smallCidr, fc.bigInt({ min: -2n, max: 1100n }), (spec, offset) => {
        const c = parseCidr(cidrText(spec));
        const from = c.network + offset;
        const seen = [...c.assignable(from)];
        assert.equal(BigInt(seen.length), c.assignableCount);
        assert.equal(new Set(seen).size, seen.length);
        assert.equal(seen[0], c.isAssignable(from) ? from : c.firstAssignable);
        for (const [i, v] of seen.entries()) {
          const ip = c.format(v);
          assert.ok(c.contains(ip), ip);
          assert.ok(v !== c.network && v !== c.gateway && v !== c.broadcast, ip);
          const next = seen[(i + 1) % seen.length];
          assert.equal(c.nextAssignable(v), next);
        }
      }),
      RUNS,
    );
  });
});
