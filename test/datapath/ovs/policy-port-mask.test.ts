/** Port ranges as masked matches: every port of 0-65535 is covered by exactly the range's blocks. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { portMasks } from '../../../src/datapath/ovs/policy-port-mask.js';

const covered = (first: number, last: number, port: number) =>
  portMasks(first, last).filter((m) => (port & m.mask) === m.value).length;

test('a range is covered exactly, each port by one block, no port outside it', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 65535 }),
      fc.integer({ min: 0, max: 65535 }),
      fc.integer({ min: 0, max: 65535 }),
      (a, b, port) => {
        const [first, last] = a <= b ? [a, b] : [b, a];
        assert.equal(covered(first, last, port), port >= first && port <= last ? 1 : 0);
        assert.ok(portMasks(first, last).length <= 30);
      },
    ),
  );
});

test('known shapes: one port, the whole space, an aligned block, 1000-2000', () => {
  assert.deepEqual(portMasks(80, 80), [{ value: 80, mask: 0xffff }]);
  assert.deepEqual(portMasks(0, 65535), [{ value: 0, mask: 0 }]);
  assert.deepEqual(portMasks(8080, 8087), [{ value: 8080, mask: 0xfff8 }]);
  assert.equal(portMasks(1000, 2000).length, 8);
  assert.throws(() => portMasks(10, 9), RangeError);
  assert.throws(() => portMasks(0, 65536), RangeError);
});
