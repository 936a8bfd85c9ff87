/**
 * Who is a pool pod (src/datapath/pod-cidrs.ts, decision 30): a pod with addresses, none in a pod CIDR
 * of the node. A review found the earlier rule ("some address outside") made a plain dual-stack pod a
 * pool pod once its node dropped the IPv6 pod CIDR; on OVS it then took the underlay's frames.
 * OVS also records the answer ADD found (port-record.ts, `podwire-underlay`), so later CIDR changes
 * do not move a pod across; an older record falls back to the addresses.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePodExternalIds, podExternalIds, recordOnUnderlay } from '../../src/datapath/ovs/port-record.js';
import { onUnderlay, podCidrs } from '../../src/datapath/pod-cidrs.js';

const DUAL = podCidrs([
  { family: 4, address: '10.244.1.1', prefixLength: 24 },
  { family: 6, address: 'fd00:1::1', prefixLength: 64 },
]);
const V4_ONLY = podCidrs([{ family: 4, address: '10.244.1.1', prefixLength: 24 }]);

test('pool pods have every address outside the pod CIDRs; any doubt is a plain pod', () => {
  assert.deepEqual(
    DUAL.map((p) => p.text),
    ['10.244.1.0/24', 'fd00:1::/64'],
  );
  assert.equal(onUnderlay(['192.0.2.101'], DUAL), true);
  assert.equal(onUnderlay(['10.244.1.5', 'fd00:1::5'], DUAL), false);
  assert.equal(
    onUnderlay(['10.244.1.5', 'fd00:1::5'], V4_ONLY),
    false,
    'still plain after the IPv6 CIDR went',
  );
  assert.equal(onUnderlay([], DUAL), false);
  assert.equal(onUnderlay(['not-an-ip'], DUAL), false);
});

test("OVS's record keeps what ADD found; an older record falls back to the addresses", () => {
  const base = { containerId: 'c', ifname: 'eth0', mac: '0a:58:c0:00:02:65', ips: ['192.0.2.101'] };
  const plain = parsePodExternalIds(podExternalIds({ ...base, underlay: false }));
  assert.ok(plain);
  assert.equal(plain.underlay, false);
  assert.equal(recordOnUnderlay(plain, DUAL), false, 'recorded plain stays plain');
  const old = parsePodExternalIds(podExternalIds(base));
  assert.ok(old);
  assert.equal(old.underlay, undefined);
  assert.equal(recordOnUnderlay(old, DUAL), true);
  assert.throws(
    () => parsePodExternalIds({ ...podExternalIds(base), 'podwire-underlay': 'yes' }),
    /podwire-underlay=yes/,
  );
});
