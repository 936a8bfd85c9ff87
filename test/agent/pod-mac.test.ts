import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { podMac } from '../../src/base/pod-mac.js';

test('the pod MAC follows the IPv4 address (0a:58 + its bytes)', () => {
  assert.equal(podMac(['10.244.1.2']), '0a:58:0a:f4:01:02');
  assert.equal(podMac(['fd00::5', '10.244.1.255']), '0a:58:0a:f4:01:ff');
});

test('an IPv6-only pod takes the last four bytes of its address', () => {
  assert.equal(podMac(['fd00:10:244:1::1:2']), '0a:58:00:01:00:02');
});

test('always a locally administered unicast MAC, the same for the same address', () => {
  fc.assert(
    fc.property(fc.ipV4(), (ip) => {
      const mac = podMac([ip]);
      assert.match(mac, /^0a:58(:[0-9a-f]{2}){4}$/);
      assert.equal(mac, podMac([ip]));
      // 0x0a: the locally administered bit is set and the multicast bit is clear.
      assert.equal(Number.parseInt(mac.slice(0, 2), 16) & 0x03, 0x02);
    }),
    { numRuns: 100 },
  );
});
