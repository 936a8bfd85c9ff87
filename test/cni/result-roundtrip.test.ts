/** Property: for every supported version, parseResult inverts formatResult (on the fields that version carries). */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { formatResult, parseResult } from '../../src/cni/result.js';
import type { CniInterface, CniIpConfig, CniResult, CniRoute } from '../../src/cni/types.js';
import { hasResultExtensions, SUPPORTED_VERSIONS } from '../../src/cni/versions.js';

const NUM_RUNS = 150;
const uint32 = fc.integer({ min: 0, max: 0xffff_ffff });
const opts = { noNullPrototype: true } as const;

const v4Cidr = fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`);
const v6Cidr = fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, p]) => `${a}/${p}`);

/** A CIDR and a gateway of the same family. */
const familyPair = fc.oneof(fc.tuple(v4Cidr, fc.ipV4()), fc.tuple(v6Cidr, fc.ipV6()));

const macArb = fc
  .uint8Array({ minLength: 6, maxLength: 6 })
  .map((b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(':'));

const interfaceArb: fc.Arbitrary<CniInterface> = fc.record(
  {
    name: fc.string({ minLength: 1, maxLength: 15 }),
    mac: macArb,
    mtu: fc.integer({ min: 68, max: 65535 }),
    sandbox: fc.constantFrom('/var/run/netns/a', '/proc/42/ns/net'),
    socketPath: fc.constant('/run/vhost.sock'),
    pciID: fc.constant('0000:00:1f.6'),
  },
  { requiredKeys: ['name'], ...opts },
);

function ipArb(interfaceCount: number): fc.Arbitrary<CniIpConfig> {
  return fc
    .tuple(
      familyPair,
      fc.boolean(),
      interfaceCount > 0
        ? fc.option(fc.nat({ max: interfaceCount - 1 }), { nil: undefined })
        : fc.constant(undefined),
    )
    .map(([[address, gateway], withGateway, index]) => {
      const ip: CniIpConfig = { address };
      if (withGateway) ip.gateway = gateway;
      if (index !== undefined) ip.interface = index;
      return ip;
    });
}

const routeArb: fc.Arbitrary<CniRoute> = fc
  .tuple(
    familyPair,
    fc.boolean(),
    fc.record(
      {
        mtu: uint32,
        advmss: uint32,
        priority: uint32,
        table: uint32,
        scope: fc.integer({ min: 0, max: 255 }),
      },
      { requiredKeys: [], ...opts },
    ),
  )
  .map(([[dst, gw], withGw, extra]) => (withGw ? { dst, gw, ...extra } : { dst, ...extra }));

const dnsArb = fc.record(
  {
    nameservers: fc.array(fc.oneof(fc.ipV4(), fc.ipV6()), { maxLength: 3 }),
    domain: fc.string(),
    search: fc.array(fc.string(), { maxLength: 3 }),
    options: fc.array(fc.string(), { maxLength: 3 }),
  },
  { requiredKeys: [], ...opts },
);

const resultArb: fc.Arbitrary<CniResult> = fc.array(interfaceArb, { maxLength: 3 }).chain((interfaces) =>
  fc.record(
    {
      interfaces: fc.constant(interfaces),
      ips: fc.array(ipArb(interfaces.length), { maxLength: 4 }),
      routes: fc.array(routeArb, { maxLength: 4 }),
      dns: dnsArb,
    },
    opts,
  ),
);

/** What a version can carry of `r`: the 1.1.0 extensions vanish below 1.1.0. */
function projectTo(r: CniResult, version: string): CniResult {
  if (hasResultExtensions(version)) return r;
  return {
    interfaces: r.interfaces.map(({ mtu: _m, socketPath: _s, pciID: _p, ...rest }) => rest),
    ips: r.ips,
    routes: r.routes.map(({ mtu: _m, advmss: _a, priority: _p, table: _t, scope: _s, ...rest }) => rest),
    dns: r.dns,
  };
}

describe('formatResult -> JSON text -> parseResult', () => {
  for (const version of SUPPORTED_VERSIONS) {
    test(`round trip in ${version}`, () => {
      fc.assert(
        fc.property(resultArb, (r) => {
          const wire = JSON.parse(JSON.stringify(formatResult(r, version))) as Record<string, unknown>;
          assert.equal(wire.cniVersion, version);
          assert.deepStrictEqual(parseResult(wire, version), projectTo(r, version));
        }),
        { numRuns: NUM_RUNS },
      );
    });
  }

  test('0.x ips always carry the right version, 1.x ips never carry one', () => {
    fc.assert(
      fc.property(resultArb, fc.constantFrom(...SUPPORTED_VERSIONS), (r, version) => {
        const wire = formatResult(r, version) as { ips: Record<string, unknown>[] };
        for (const [i, ip] of wire.ips.entries()) {
          const expected = r.ips[i]?.address.includes(':') ? '6' : '4';
          if (version.startsWith('0.')) assert.equal(ip.version, expected);
          else assert.equal(Object.hasOwn(ip, 'version'), false);
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('converting a result between versions goes through the 1.x shape losslessly', () => {
    fc.assert(
      fc.property(
        resultArb,
        fc.constantFrom(...SUPPORTED_VERSIONS),
        fc.constantFrom(...SUPPORTED_VERSIONS),
        (r, a, b) => {
          const viaA = parseResult(formatResult(r, a), a);
          assert.deepStrictEqual(formatResult(viaA, b), formatResult(projectTo(r, a), b));
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });
});
