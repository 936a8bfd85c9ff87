/** OXM TLVs and ofp_match: round trips, prerequisite order, normalisation, and corrupted input. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DecodeError } from '../../../../src/base/errors.js';
import { CodecReader } from '../../../../src/datapath/ovs/openflow/codec-reader.js';
import { matchKey } from '../../../../src/datapath/ovs/openflow/flow-key.js';
import {
  decodeMatch,
  decodeOxm,
  encodeMatch,
  encodeOxm,
  fieldByName,
  normalizeOxm,
  OFPXMC,
  type OxmField,
  oxm,
  prerequisiteOrder,
} from '../../../../src/datapath/ovs/openflow/oxm.js';
import { anyMatch, anyOxm } from './flow-arbitraries.js';

const decodeDecodeErrorOnly = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
  }
};

test('an OXM TLV decodes to what was encoded (known, unknown and experimenter fields, masked or not)', () => {
  fc.assert(
    fc.property(anyOxm, (f) => {
      const r = new CodecReader(encodeOxm(f), 'test');
      assert.deepEqual(decodeOxm(r), f);
      assert.equal(r.remaining, 0);
    }),
    { numRuns: 500 },
  );
});

test('OXM header layout: class 16 bits, field 7, hasmask 1, length 8 (OpenFlow 1.3.5, 7.2.3.2)', () => {
  const eth = fieldByName('eth_dst');
  assert.ok(eth);
  const masked = encodeOxm(oxm(eth, Buffer.from('010000000000', 'hex'), Buffer.from('010000000000', 'hex')));
  assert.equal(masked.toString('hex'), '8000070c010000000000010000000000');
  const reg1 = fieldByName('reg1');
  assert.ok(reg1);
  assert.equal(encodeOxm(oxm(reg1, Buffer.from('00000064', 'hex'))).toString('hex'), '0001020400000064');
  assert.equal(reg1.oxmClass, OFPXMC.NXM_1);
});

test('a match decodes to its fields in prerequisite order, padded to 8', () => {
  fc.assert(
    fc.property(anyMatch, (m) => {
      const bytes = encodeMatch(m);
      assert.equal(bytes.length % 8, 0);
      const r = new CodecReader(bytes, 'test');
      assert.deepEqual(decodeMatch(r), prerequisiteOrder(m));
      assert.equal(r.remaining, 0);
    }),
    { numRuns: 300 },
  );
});

test('prerequisites come first: eth_type before arp_spa, ip_proto before icmpv6_type, the ICMPv6 type before nd_target', () => {
  const f = (name: string, hex: string) =>
    oxm(fieldByName(name) as NonNullable<ReturnType<typeof fieldByName>>, Buffer.from(hex, 'hex'));
  const m = [
    f('nd_target', '00'.repeat(16)),
    f('icmpv6_type', '88'),
    f('ip_proto', '3a'),
    f('in_port', '00000007'),
    f('eth_type', '86dd'),
  ];
  assert.deepEqual(
    prerequisiteOrder(m).map((x) => x.field),
    [0, 5, 10, 29, 31],
  );
});

test('the match key applies masks, drops all-ones and all-zero masks, and does not depend on order', () => {
  fc.assert(
    fc.property(anyMatch, fc.func(fc.integer()), (m, rank) => {
      const shuffled = [...m].sort((a, b) => rank(a) - rank(b));
      assert.equal(matchKey(shuffled), matchKey(m));
      const normal = m.map(normalizeOxm).filter((x): x is OxmField => x !== null);
      assert.equal(matchKey(normal), matchKey(m));
    }),
    { numRuns: 200 },
  );
  const dst = fieldByName('eth_dst');
  assert.ok(dst);
  const ones = Buffer.alloc(6, 0xff);
  assert.equal(
    matchKey([oxm(dst, Buffer.from('0a0000000001', 'hex'), ones)]),
    matchKey([oxm(dst, Buffer.from('0a0000000001', 'hex'))]),
  );
  assert.equal(matchKey([oxm(dst, Buffer.from('0a0000000001', 'hex'), Buffer.alloc(6))]), '');
  assert.equal(
    matchKey([oxm(dst, Buffer.from('ff0000000001', 'hex'), Buffer.from('010000000000', 'hex'))]),
    matchKey([oxm(dst, Buffer.from('010000000000', 'hex'), Buffer.from('010000000000', 'hex'))]),
  );
});

test('NXM and OXM forms of one field have one key (NXM_OF_ETH_SRC = OXM ETH_SRC)', () => {
  const v = Buffer.from('0a580af40102', 'hex');
  assert.equal(
    matchKey([{ oxmClass: OFPXMC.NXM_0, field: 2, value: v }]),
    matchKey([{ oxmClass: OFPXMC.OPENFLOW_BASIC, field: 4, value: v }]),
  );
});

test('a truncated or corrupted match is a DecodeError, never another error or a hang', () => {
  fc.assert(
    fc.property(anyMatch, fc.nat(), (m, cut) => {
      const bytes = encodeMatch(m);
      const n = cut % bytes.length;
      assert.throws(() => decodeMatch(new CodecReader(bytes.subarray(0, n), 'test')), DecodeError);
    }),
    { numRuns: 300 },
  );
  fc.assert(
    fc.property(
      anyMatch,
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }),
      (m, edits) => {
        const bytes = Buffer.from(encodeMatch(m));
        for (const [at, b] of edits) bytes[at % bytes.length] = b;
        decodeDecodeErrorOnly(() => decodeMatch(new CodecReader(bytes, 'test')));
      },
    ),
    { numRuns: 300 },
  );
  assert.throws(
    () => decodeMatch(new CodecReader(Buffer.from('0001000c80000d0410', 'hex'), 'test')),
    /truncated at ofp_match fields|truncated/,
  );
});
