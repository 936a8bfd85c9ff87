/**
 * Issue 17: the delta path (`updatePeers`) and the full converge (`setPeers`) agree. For random
 * sequences of peer additions, changes and removals, applied in random batches with `updatePeers`,
 * the kernel of a throwaway node namespace holds exactly the routes, neighbours and FDB entries that
 * a full converge of the final peer list leaves, whether that converge starts from the delta's state
 * or from nothing. Both overlays; CIDRs are drawn from a small set so that two peers sometimes claim
 * the same one (the smaller name holds it, on both paths).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { Overlay, PeerNode } from '../../src/datapath/overlay/overlay.js';
import { RoutedOverlay } from '../../src/datapath/overlay/routed-overlay.js';
import { VXLAN_DEVICE, VxlanOverlay } from '../../src/datapath/overlay/vxlan-overlay.js';
import { type BedNode, type KernelView, OverlayBed, UPLINK } from './overlay-bed.js';

const NAMES = ['peer-a', 'peer-b', 'peer-c', 'peer-d', 'peer-e', 'peer-f'];

/** A record drawn from small sets: CIDRs collide across peers, underlays and MACs change. */
const recordArb = (name: string): fc.Arbitrary<PeerNode> =>
  fc
    .record({
      v4: fc.integer({ min: 0, max: 7 }),
      v6: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
      underlay: fc.integer({ min: 10, max: 14 }),
      mac: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
    })
    .map(({ v4, v6, underlay, mac }) => ({
      name,
      underlayIP: `192.168.77.${underlay}`,
      podCIDRs: [`10.247.${v4}.0/24`, ...(v6 === undefined ? [] : [`fd00:247:${v6}::/64`])],
      ...(mac === undefined ? {} : { vtepMac: `02:00:00:00:00:0${mac}` }),
    }));

type Step = { put: PeerNode } | { remove: string };
const stepArb: fc.Arbitrary<Step> = fc
  .constantFrom(...NAMES)
  .chain((name) =>
    fc.oneof(
      { weight: 3, arbitrary: recordArb(name).map((put) => ({ put })) },
      { weight: 1, arbitrary: fc.constant({ remove: name }) },
    ),
  );
/** Steps cut into batches (the events one `updatePeers` receives). */
const batchesArb = fc.array(fc.array(stepArb, { minLength: 1, maxLength: 4 }), {
  minLength: 1,
  maxLength: 8,
});

interface Impl {
  name: string;
  device: string;
  make(node: BedNode): Overlay;
}

const IMPLS: Impl[] = [
  {
    name: 'VxlanOverlay',
    device: VXLAN_DEVICE,
    make: (n) =>
      new VxlanOverlay({
        nl: n.nl,
        nodeName: n.name,
        uplinkIndex: n.uplinkIndex,
        underlayIP: n.underlayIP,
        uplinkMtu: 1500,
        podCIDRs: n.podCIDRs,
      }),
  },
  {
    name: 'RoutedOverlay',
    device: UPLINK,
    make: (n) => new RoutedOverlay({ nl: n.nl, uplinkIndex: n.uplinkIndex, podCIDRs: n.podCIDRs }),
  },
];

function overlayState(v: KernelView): Omit<KernelView, 'foreignRoutes'> {
  return { routes: v.routes, neighbours: v.neighbours, fdb: v.fdb };
}

for (const impl of IMPLS) {
  describe(`Overlay delta vs full converge: ${impl.name}`, () => {
    let bed: OverlayBed;
    let node: BedNode;

    before(async () => {
      bed = await OverlayBed.create(4);
      node = bed.nodes[0] as BedNode;
    });
    after(async () => {
      await bed?.cleanup();
    });

    test('after random add/change/remove batches, the kernel equals a full converge of the final list', async () => {
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(batchesArb, async (batches) => {
          runs++;
          // Each run starts from nothing: a full converge of no peers.
          const delta = impl.make(node);
          await delta.start();
          await delta.setPeers([]);
          const model = new Map<string, PeerNode>();
          for (const batch of batches) {
            const put = new Map<string, PeerNode>();
            const removed = new Set<string>();
            for (const step of batch) {
              if ('put' in step) {
                model.set(step.put.name, step.put);
                put.set(step.put.name, step.put);
                removed.delete(step.put.name);
              } else {
                model.delete(step.remove);
                put.delete(step.remove);
                removed.add(step.remove);
              }
            }
            await delta.updatePeers({ put: [...put.values()], removed: [...removed] });
            const status = delta.status();
            assert.deepEqual(status.peers, [...model.keys()].sort(), 'status.peers after a delta');
          }
          const afterDelta = overlayState(await bed.view(node, impl.device));
          const final = [...model.values()];
          // A full converge from the delta's state changes nothing.
          const converge = impl.make(node);
          await converge.start();
          await converge.setPeers(final);
          assert.deepEqual(
            overlayState(await bed.view(node, impl.device)),
            afterDelta,
            'converge after the deltas',
          );
          // And a full converge from nothing reaches the same state.
          const scratch = impl.make(node);
          await scratch.start();
          await scratch.setPeers([]);
          assert.deepEqual(overlayState(await bed.view(node, impl.device)).routes, [], 'no routes left');
          await scratch.setPeers(final);
          assert.deepEqual(
            overlayState(await bed.view(node, impl.device)),
            afterDelta,
            'converge from nothing',
          );
          for (const o of [delta, converge, scratch]) await o.stop();
        }),
        { numRuns: 20 },
      );
      assert.equal(runs >= 20, true);
    });
  });
}
