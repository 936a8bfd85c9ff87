/**
 * PeerCheck (src/agent/startup/peer-check.ts), as a pure function of the records: after any sequence
 * of changes the accepted records never overlap each other or this node, and a full check (`reset`,
 * what the periodic converge runs) accepts exactly the records the changes had accepted (first come,
 * first served survives it). fast-check over records drawn from small sets, so collisions are common.
 * VTEP MACs too: no two accepted records (nor one and this node) use one VTEP MAC, since the VXLAN
 * overlay points a MAC's FDB entry at one underlay address (the review's vtep-hijack repro).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { PeerCheck } from '../../src/agent/startup/peer-check.js';
import { parsePrefixOrThrow, prefixesOverlap } from '../../src/base/ip.js';
import type { NodeRecord } from '../../src/cluster/store.js';
import { vtepMacFor, vtepMacOf } from '../../src/datapath/overlay/vxlan-overlay.js';

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
/** Absent (derived from the name), another record's derived MAC, this node's, a shared one, bad ones. */
const MACS = [
  undefined,
  vtepMacFor('a'),
  vtepMacFor('b'),
  vtepMacFor('self'),
  '02:00:00:00:00:01',
  '00:00:00:00:00:00',
  '01:00:5e:00:00:01',
];

const recordArb = (name: string): fc.Arbitrary<NodeRecord> =>
  fc
    .record({
      cidr: fc.constantFrom(...CIDRS),
      underlay: fc.constantFrom(...UNDERLAYS),
      mac: fc.constantFrom(...MACS),
    })
    .map(({ cidr, underlay, mac }) => ({
      name,
      underlayIP: underlay,
      podCIDRs: [cidr],
      ...(mac === undefined ? {} : { vtepMac: mac }),
    }));

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
        const macs = all.map((r) => vtepMacOf(r));
        assert.equal(new Set(macs).size, macs.length, `one VTEP MAC per node: ${macs.join(' ')}`);
        for (const mac of macs) assert.ok(mac !== '00:00:00:00:00:00' && !mac.startsWith('01:'), mac);
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

/**
 * The review's vtep-hijack repro as unit tests. Each depends on PeerCheck's VTEP MAC rule in
 * src/agent/startup/peer-check.ts: the lookup `this.#macs.get(mac)` in #check (refused while the
 * owner is accepted, this node's MAC indexed by the constructor's `#index(o.self)`), `#unindex`
 * dropping the owner's MAC (re-judged when it goes), the form checks (`ZERO_MAC`, the multicast
 * bit) and, for the fresh start, the `copies` rank in `update`. Without them the impostor is
 * accepted and the VXLAN overlay (peer-table.ts: smaller name wins) sends node-2's traffic to it.
 */
const SELF_V = { name: 'self', underlayIP: '192.168.0.1', podCIDRs: ['10.246.1.0/24'] };
const NODE2: NodeRecord = {
  name: 'node-2',
  underlayIP: '192.168.0.2',
  podCIDRs: ['10.246.2.0/24'],
  vtepMac: vtepMacFor('node-2'),
};
/** Sorts before node-2 by name, so it would win the FDB entry in the overlay. */
const IMPOSTOR: NodeRecord = {
  name: 'a-impostor',
  underlayIP: '192.168.77.9',
  podCIDRs: ['10.246.9.0/24'],
  vtepMac: vtepMacFor('node-2'),
};
const one = (r: NodeRecord): Map<string, NodeRecord | undefined> => new Map([[r.name, r]]);

test("peer check: a record using an accepted peer's VTEP MAC is refused, naming the peer", () => {
  const check = new PeerCheck({ self: SELF_V, clusterCIDRs: ['10.246.0.0/16'] });
  assert.deepEqual(
    check.update(one(NODE2)).put.map((r) => r.name),
    ['node-2'],
  );
  const c = check.update(one(IMPOSTOR));
  assert.deepEqual(c.put, []);
  assert.deepEqual(c.refused, [
    { name: 'a-impostor', reason: `VTEP MAC ${NODE2.vtepMac} is the VTEP MAC of node node-2` },
  ]);
  assert.deepEqual(
    check.accepted.map((r) => r.name),
    ['node-2'],
  );
  assert.deepEqual(
    check.refused.map((r) => r.name),
    ['a-impostor'],
  );
  assert.equal(check.refusedTotal, 1);
  // Upper case is the same MAC.
  const upper = { ...IMPOSTOR, name: 'b-impostor', vtepMac: (NODE2.vtepMac as string).toUpperCase() };
  assert.match(check.update(one(upper)).refused[0]?.reason ?? '', /VTEP MAC .* of node node-2/);
  // A record without vtepMac uses the MAC derived from its name: so does node-2 here.
  const { vtepMac: _, ...derived } = NODE2;
  const check2 = new PeerCheck({ self: SELF_V });
  check2.update(one(derived));
  assert.match(check2.update(one(IMPOSTOR)).refused[0]?.reason ?? '', /of node node-2$/);
  // A full check keeps the winner.
  check.reset([NODE2, IMPOSTOR]);
  assert.deepEqual(
    check.accepted.map((r) => r.name),
    ['node-2'],
  );
});

test('peer check: a record refused for its VTEP MAC is accepted once the owner goes or changes MAC', () => {
  const check = new PeerCheck({ self: SELF_V });
  check.update(one(NODE2));
  check.update(one(IMPOSTOR));
  const gone = check.update(new Map([['node-2', undefined]]));
  assert.deepEqual(gone.removed, ['node-2']);
  assert.deepEqual(
    gone.put.map((r) => r.name),
    ['a-impostor'],
  );
  assert.deepEqual(check.refused, []);
  // node-2 back (first come, first served): now it is the one refused.
  assert.match(check.update(one(NODE2)).refused[0]?.reason ?? '', /of node a-impostor$/);
  // The owner's record changes to another MAC: the MAC is free, node-2 is checked again.
  const moved = check.update(one({ ...IMPOSTOR, vtepMac: '02:00:00:00:00:09' }));
  assert.deepEqual(moved.put.map((r) => r.name).sort(), ['a-impostor', 'node-2']);
  assert.deepEqual(check.refused, []);
});

test("peer check: a record using this node's VTEP MAC is refused", () => {
  for (const self of [SELF_V, { ...SELF_V, vtepMac: '02:00:00:00:00:05' }]) {
    const check = new PeerCheck({ self });
    const c = check.update(one({ ...NODE2, vtepMac: vtepMacOf(self) }));
    assert.deepEqual(c.refused, [
      { name: 'node-2', reason: `VTEP MAC ${vtepMacOf(self)} is the VTEP MAC of this node` },
    ]);
    assert.deepEqual(check.accepted, []);
  }
});

test('peer check: an all-zero, multicast or broadcast VTEP MAC is refused', () => {
  const check = new PeerCheck({ self: SELF_V });
  const cases: Array<[string, RegExp]> = [
    ['00:00:00:00:00:00', /is all zeros/],
    ['01:00:5e:00:00:01', /is not a unicast address/],
    ['ff:ff:ff:ff:ff:ff', /is not a unicast address/],
    ['33:33:00:00:00:01', /is not a unicast address/],
    ['not-a-mac', /is not a MAC address/],
  ];
  for (const [mac, reason] of cases) {
    const c = check.update(one({ ...NODE2, vtepMac: mac }));
    assert.deepEqual(c.put, [], mac);
    assert.match(c.refused[0]?.reason ?? '', reason, mac);
  }
  assert.deepEqual(
    check.update(one({ ...NODE2, vtepMac: '02:00:00:00:00:01' })).put.map((r) => r.name),
    ['node-2'],
  );
});

test('peer check: at a fresh start the name-derived owner wins its VTEP MAC, whatever the names', () => {
  // The review repro's order: both records new in one check. By name alone a-impostor went first.
  const check = new PeerCheck({ self: SELF_V, clusterCIDRs: ['10.246.0.0/16'] });
  const c = check.reset([IMPOSTOR, NODE2]);
  assert.deepEqual(
    c.put.map((r) => r.name),
    ['node-2'],
  );
  assert.deepEqual(
    check.refused.map((r) => r.name),
    ['a-impostor'],
  );
  // Two records naming one MAC that neither derives: by name, as for CIDRs.
  const shared = new PeerCheck({ self: SELF_V });
  shared.reset([
    { ...NODE2, name: 'node-3', vtepMac: '02:00:00:00:00:07' },
    { ...IMPOSTOR, vtepMac: '02:00:00:00:00:07' },
  ]);
  assert.deepEqual(
    shared.accepted.map((r) => r.name),
    ['a-impostor'],
  );
});
