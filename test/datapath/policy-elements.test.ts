/**
 * The Linux bridge's NetworkPolicy elements without a kernel (policy-elements.ts): the cutting of
 * overlapping rules into disjoint cells, by properties over small ranges where every point can be
 * checked, and the elements of a hand-made `PodPolicy`.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  disjointCells,
  disjointSpans,
  policyElements,
} from '../../src/datapath/linux-bridge/policy-elements.js';

const span = fc
  .record({
    a: fc.integer({ min: 0, max: 40 }),
    b: fc.integer({ min: 0, max: 40 }),
    owner: fc.integer({ min: 0, max: 4 }),
  })
  .map(({ a, b, owner }) => ({ lo: BigInt(Math.min(a, b)), hi: BigInt(Math.max(a, b)), owner }));

/** The lowest owner covering `p`, or -1. */
const ownerAt = (spans: ReadonlyArray<{ lo: bigint; hi: bigint; owner: number }>, p: bigint) =>
  spans.filter((s) => s.lo <= p && p <= s.hi).reduce((o, s) => (o < 0 || s.owner < o ? s.owner : o), -1);

describe('policy elements', () => {
  test('disjointSpans: every point keeps the lowest owner covering it; spans disjoint, sorted, merged', () => {
    fc.assert(
      fc.property(fc.array(span, { maxLength: 8 }), (spans) => {
        const out = disjointSpans(spans);
        for (let p = 0n; p <= 41n; p++) assert.equal(ownerAt(out, p), ownerAt(spans, p), `point ${p}`);
        for (let i = 1; i < out.length; i++) {
          const [a, b] = [out[i - 1], out[i]] as [(typeof out)[0], (typeof out)[0]];
          assert.ok(a.hi < b.lo, 'disjoint and sorted');
          assert.ok(!(a.hi + 1n === b.lo && a.owner === b.owner), 'touching spans of one owner merged');
        }
      }),
      { numRuns: 300 },
    );
  });

  test('disjointCells: every (peer, port) point keeps the lowest rule covering it; cells never overlap', () => {
    const rect = fc.record({ peer: span, port: span }).map(({ peer, port }) => ({
      peer,
      portLo: Number(port.lo),
      portHi: Number(port.hi),
    }));
    fc.assert(
      fc.property(fc.array(rect, { maxLength: 6 }), (rects) => {
        const cells = disjointCells(rects).flatMap((c) =>
          c.ports.map((p) => ({
            peerLo: c.peerLo,
            peerHi: c.peerHi,
            portLo: p.lo,
            portHi: p.hi,
            owner: p.owner,
          })),
        );
        for (let x = 0n; x <= 41n; x += 1n)
          for (let y = 0n; y <= 41n; y += 1n) {
            const want = rects
              .filter((r) => r.peer.lo <= x && x <= r.peer.hi && r.portLo <= y && y <= r.portHi)
              .reduce((o, r) => (o < 0 || r.peer.owner < o ? r.peer.owner : o), -1);
            const hits = cells.filter(
              (c) => c.peerLo <= x && x <= c.peerHi && c.portLo <= y && y <= c.portHi,
            );
            assert.ok(hits.length <= 1, `(${x}, ${y}) in ${hits.length} cells`);
            assert.equal(hits[0]?.owner ?? -1, want, `(${x}, ${y})`);
          }
      }),
      { numRuns: 150 },
    );
  });

  test('an isolated pod with no rule is its isolation elements only; a bad CIDR throws before anything', () => {
    const els = policyElements([
      {
        namespace: 'n',
        name: 'p',
        ips: ['10.0.0.5', 'fd00::5'],
        ingress: { policies: ['n/x'], rules: [] },
        egress: null,
      },
    ]);
    assert.deepEqual(
      els.map((e) => [e.set, Buffer.from(e.key).toString('hex'), e.owner.rule]),
      [
        ['in_iso4', '0a000005', 'n/p/ingress/deny'],
        ['in_iso6', 'fd000000000000000000000000000005', 'n/p/ingress/deny'],
      ],
    );
    assert.throws(
      () =>
        policyElements([
          {
            namespace: 'n',
            name: 'p',
            ips: ['10.0.0.5'],
            ingress: {
              policies: ['n/x'],
              rules: [{ id: 'n/x/ingress/0', entries: [{ peers: ['10.0.0.0/33'], ports: 'any' }] }],
            },
            egress: null,
          },
        ]),
      /invalid peer CIDR "10.0.0.0\/33"/,
    );
  });
});
