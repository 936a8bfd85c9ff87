/**
 * PeerCheck (src/agent/startup/peer-check.ts), as a pure function of the records: after any sequence
 * of changes the accepted records never overlap each other or this node, and a full check (`reset`,
 * what the periodic converge runs) accepts exactly the records the changes had accepted (first come,
 * first served survives it). fast-check over records drawn from small sets, so collisions are common.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { PeerCheck } from '../../src/agent/startup/peer-check.js';
import { parsePrefixOrThrow, prefixesOverlap } from '../../src/base/ip.js';
import type { NodeRecord } from '../../src/cluster/store.js';

const SELF = { name: 'self', underlayIP: '192.168.0.1', podCIDRs: ['10.0.0.0/24'] };
const NAMES = ['a', 'b', 'c', 'd', 'e', 'f'];
const CIDRS = [
  '10.0.0.0/24',
  '10.0.1.0/24',
  '10.0.1.128/25',
  '10.0.2.0/24',
  '10.0.0.0/16',
  '192.168.0.0/24',
  '10.1.0.0/24',
];
const UNDERLAYS = ['192.168.0.1', '192.168.0.2', '192.168.0.3', '10.0.2.5'];

const recordArb = (name: string): fc.Arbitrary<NodeRecord> =>
  fc
    .record({ cidr: fc.constantFrom(...CIDRS), underlay: fc.constantFrom(...UNDERLAYS) })
    .map(({ cidr, underlay }) => ({ name, underlayIP: underlay, podCIDRs: [cidr] }));

const stepsArb = fc.array(
  fc.array(
    fc
      .constantFrom(...NAMES)
      .chain((name) =>
        fc.option(recordArb(name), { nil: undefined, freq: 3 }).map((r) => [name, r] as const),
      ),
    { minLength: 1, maxLength: 3 },
  ),
  { minLength: 1, maxLength: 12 },
);

for (const clusterCIDRs of [undefined, ['10.0.0.0/16']]) {
  test(`peer check: accepted records never overlap; a full check keeps them (clusterCIDRs ${clusterCIDRs ?? 'none'})`, () => {
    fc.assert(
      fc.property(stepsArb, (steps) => {
        const check = new PeerCheck({ self: SELF, ...(clusterCIDRs ? { clusterCIDRs } : {}) });
        const store = new Map<string, NodeRecord>();
        for (const batch of steps) {
          const changes = new Map<string, NodeRecord | undefined>();
          for (const [name, record] of batch) {
            changes.set(name, record);
            if (record) store.set(name, record);
            else store.delete(name);
          }
          check.update(changes);
        }
        const accepted = check.accepted.sort((x, y) => (x.name < y.name ? -1 : 1));
        const all = [SELF, ...accepted];
        for (const [i, x] of all.entries()) {
          for (const y of all.slice(i + 1)) {
            const px = parsePrefixOrThrow(x.podCIDRs[0] as string);
            const py = parsePrefixOrThrow(y.podCIDRs[0] as string);
            assert.ok(!prefixesOverlap(px, py), `${x.name} and ${y.name} overlap`);
          }
        }
        for (const r of accepted)
          assert.deepEqual(r, store.get(r.name), 'an accepted record is the current one');
        const names = accepted.map((r) => r.name);
        check.reset(store.values());
        assert.deepEqual(
          check.accepted.map((r) => r.name).sort(),
          names,
          'a full check accepts the same records',
        );
        assert.deepEqual(
          check.refused.map((r) => r.name).sort(),
          [...store.keys()].filter((n) => !names.includes(n)).sort(),
          'every other record is refused',
        );
      }),
      { numRuns: 300 },
    );
  });
}
