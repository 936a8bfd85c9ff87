/** What captured frames claim: ARP, NS with SLL, NA with TLL, DAD probes, 802.1Q tags; and the audit over them. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { gratuitousArp } from '../../src/arp/arp-frame.js';
import { auditArp } from '../../src/arp/audit.js';
import { isNeighbourFrame } from '../../src/arp/capture.js';
import { unsolicitedNeighborAdvertisement } from '../../src/arp/ndp-frame.js';
import { decodeClaim } from '../../src/arp/neighbour-claim.js';

const MAC = '0a:58:0a:f4:01:02';
const V6 = 'fd00:10:244:1::2';
/** ICMPv6 type offset and the first option's type offset in an untagged NA frame. */
const ICMP = 14 + 40;
const OPT = ICMP + 24;

/** A neighbour solicitation from `src` (an NA rewritten: type 135, option 1 = source link-layer address). */
function solicitation(mac: string, src: string): Buffer {
  const f = unsolicitedNeighborAdvertisement(mac, src);
  f.writeUInt8(135, ICMP);
  f.writeUInt8(1, OPT);
  return f;
}

function tagged(frame: Buffer, vlan: number): Buffer {
  const tag = Buffer.from([0x81, 0x00, (vlan >> 8) & 0x0f, vlan & 0xff]);
  return Buffer.concat([frame.subarray(0, 12), tag, frame.subarray(12)]);
}

test('ARP claims (spa, sha); NA claims (target, TLL); NS claims (source, SLL)', () => {
  assert.deepEqual(decodeClaim(gratuitousArp(MAC, '10.244.1.2')), {
    proto: 'arp',
    src: MAC,
    senderIp: '10.244.1.2',
    senderMac: MAC,
  });
  assert.deepEqual(decodeClaim(unsolicitedNeighborAdvertisement(MAC, V6)), {
    proto: 'nd',
    src: MAC,
    senderIp: V6,
    senderMac: MAC,
  });
  assert.equal(decodeClaim(solicitation(MAC, V6))?.senderIp, V6);
});

test('a DAD probe (source ::) and an NS without a link-layer option claim nothing', () => {
  assert.equal(decodeClaim(solicitation(MAC, '::')), undefined);
  const bare = solicitation(MAC, V6).subarray(0, OPT);
  bare.writeUInt16BE(24, 14 + 4); // payload length without the option
  assert.equal(decodeClaim(bare), undefined);
});

test('an 802.1Q tag is looked through and reported', () => {
  const c = decodeClaim(tagged(gratuitousArp(MAC, '10.244.1.2'), 42));
  assert.equal(c?.vlan, 42);
  assert.equal(c?.senderIp, '10.244.1.2');
  assert.ok(isNeighbourFrame(tagged(unsolicitedNeighborAdvertisement(MAC, V6), 7)));
  assert.equal(decodeClaim(tagged(unsolicitedNeighborAdvertisement(MAC, V6), 7))?.vlan, 7);
});

test('the capture filter keeps ARP and NS/NA only', () => {
  assert.ok(isNeighbourFrame(gratuitousArp(MAC, '10.244.1.2')));
  assert.ok(isNeighbourFrame(solicitation(MAC, V6)));
  const echo = unsolicitedNeighborAdvertisement(MAC, V6);
  echo.writeUInt8(128, ICMP);
  assert.ok(!isNeighbourFrame(echo));
  assert.ok(!isNeighbourFrame(Buffer.alloc(60)));
});

test('ND: a pod IPv6 address with another MAC is WRONG-MAC', () => {
  const r = auditArp(
    [unsolicitedNeighborAdvertisement('02:00:00:00:00:99', V6)],
    [{ ip: V6, mac: MAC, owner: 'pod' }],
  );
  assert.equal(r.violations[0]?.verdict, 'WRONG-MAC');
  assert.equal(r.violations[0]?.proto, 'nd');
});

test('two MACs claiming one unknown address are a CONFLICT; one MAC is merely unknown', () => {
  const a = gratuitousArp('02:00:00:00:00:0a', '192.0.2.7');
  const b = gratuitousArp('02:00:00:00:00:0b', '192.0.2.7');
  const one = auditArp([a, a], []);
  assert.deepEqual(one.violations, []);
  const two = auditArp([a, b], []);
  assert.deepEqual(
    two.violations.map((v) => [v.senderMac, v.verdict]),
    [
      ['02:00:00:00:00:0a', 'CONFLICT'],
      ['02:00:00:00:00:0b', 'CONFLICT'],
    ],
  );
  // The same address in two VLANs is two addresses.
  assert.deepEqual(auditArp([tagged(a, 10), tagged(b, 20)], []).violations, []);
});

test('property: random bytes never throw out of the audit', () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 0, maxLength: 120 }), (bytes) => {
      const r = auditArp([Buffer.from(bytes)], []);
      assert.equal(r.frames, 1);
    }),
    { numRuns: 200 },
  );
});
