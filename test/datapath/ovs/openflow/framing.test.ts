/**
 * OpenFlow framing and the small codecs of the connection layer: any byte stream of messages, cut
 * anywhere, comes out as the same messages in order; HELLO version bitmaps; ERROR bodies; bundle
 * control messages.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DecodeError } from '../../../../src/base/errors.js';
import { decodeBundleCtrl, encodeBundleCtrl } from '../../../../src/datapath/ovs/openflow/bundle.js';
import {
  decodeErrorMsg,
  encodeErrorMsg,
  errorName,
  ONF_EXPERIMENTER_ID,
} from '../../../../src/datapath/ovs/openflow/error-msg.js';
import { OfpFramer } from '../../../../src/datapath/ovs/openflow/framing.js';
import {
  decodeHeader,
  encodeMessage,
  OFP10_VERSION,
  OFP13_VERSION,
} from '../../../../src/datapath/ovs/openflow/header.js';
import { encodeHelloBody, helloAllows } from '../../../../src/datapath/ovs/openflow/hello.js';

const message = fc.record({
  version: fc.constantFrom(OFP10_VERSION, OFP13_VERSION),
  type: fc.integer({ min: 0, max: 255 }),
  xid: fc.nat({ max: 0xffffffff }),
  body: fc.uint8Array({ maxLength: 300 }),
});

// Depends on: framing.ts (OfpFramer), header.ts.
test('a stream of messages split at random points decodes to the same messages', () => {
  fc.assert(
    fc.property(
      fc.array(message, { minLength: 1, maxLength: 8 }),
      fc.array(fc.nat(), { maxLength: 12 }),
      (msgs, cuts) => {
        const encoded = msgs.map((m) => encodeMessage(m.version, m.type, m.xid, m.body));
        const stream = Buffer.concat(encoded);
        const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
        const framer = new OfpFramer();
        const got: Buffer[] = [];
        let from = 0;
        for (const p of [...points, stream.length]) {
          got.push(...framer.push(stream.subarray(from, p)));
          from = p;
        }
        assert.deepEqual(got, encoded);
        assert.equal(framer.pending, 0);
        assert.deepEqual(
          got.map((g) => decodeHeader(g).xid),
          msgs.map((m) => m.xid),
        );
      },
    ),
    { numRuns: 500 },
  );
});

// Depends on: framing.ts (a length under the header's 8 bytes is refused).
test('a length under 8 is a DecodeError, wherever it falls in the stream', () => {
  fc.assert(
    fc.property(fc.array(message, { maxLength: 3 }), fc.integer({ min: 0, max: 7 }), (msgs, badLen) => {
      const bad = Buffer.from([4, 0, 0, badLen, 0, 0, 0, 9]);
      const stream = Buffer.concat([
        ...msgs.map((m) => encodeMessage(m.version, m.type, m.xid, m.body)),
        bad,
      ]);
      assert.throws(() => new OfpFramer().push(stream), DecodeError);
    }),
  );
});

// Depends on: hello.ts.
test('HELLO: our bitmap names exactly our version; a peer HELLO allows a version by bitmap or by header', () => {
  const ours = encodeMessage(OFP13_VERSION, 0, 1, encodeHelloBody(OFP13_VERSION));
  assert.equal(ours.length, 16);
  assert.equal(ours.readUInt32BE(12), 1 << 4);
  assert.equal(encodeHelloBody(OFP10_VERSION).length, 0);
  fc.assert(
    fc.property(fc.nat({ max: 0x7e }), (bits) => {
      const bitmap = bits << 1;
      const body = Buffer.alloc(8);
      body.writeUInt16BE(1, 0);
      body.writeUInt16BE(8, 2);
      body.writeUInt32BE(bitmap, 4);
      const peer = encodeMessage(0x06, 0, 1, body);
      for (const v of [OFP10_VERSION, OFP13_VERSION])
        assert.equal(helloAllows(peer, v), ((bitmap >> v) & 1) === 1);
    }),
  );
  // No bitmap: the smaller header version must be ours.
  assert.equal(helloAllows(encodeMessage(0x05, 0, 1), OFP13_VERSION), true);
  assert.equal(helloAllows(encodeMessage(0x01, 0, 1), OFP13_VERSION), false);
});

// Depends on: error-msg.ts.
test('ERROR bodies round-trip; names are spec names with numbers as the fallback', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 0xfffe }),
      fc.integer({ min: 0, max: 0xffff }),
      fc.uint8Array({ maxLength: 80 }),
      (errorType, errorCode, data) => {
        const e = { errorType, errorCode, data: Buffer.from(data) };
        assert.deepEqual(decodeErrorMsg(encodeErrorMsg(e)), e);
      },
    ),
  );
  const exp = {
    errorType: 0xffff,
    errorCode: 2313,
    experimenter: ONF_EXPERIMENTER_ID,
    data: Buffer.alloc(8),
  };
  assert.deepEqual(decodeErrorMsg(encodeErrorMsg(exp)), exp);
  assert.equal(errorName(OFP13_VERSION, exp), 'OFPET_EXPERIMENTER/ONF OFPBFC_MSG_FAILED');
  assert.equal(
    errorName(OFP13_VERSION, { errorType: 5, errorCode: 2 }),
    'OFPET_FLOW_MOD_FAILED/OFPFMFC_BAD_TABLE_ID',
  );
  assert.equal(
    errorName(OFP13_VERSION, { errorType: 3, errorCode: 1 }),
    'OFPET_BAD_INSTRUCTION/OFPBIC_UNSUP_INST',
  );
  assert.equal(
    errorName(OFP10_VERSION, { errorType: 4, errorCode: 1 }),
    'OFPET_PORT_MOD_FAILED/OFPPMFC_BAD_HW_ADDR',
  );
  assert.equal(errorName(OFP13_VERSION, { errorType: 5, errorCode: 99 }), 'OFPET_FLOW_MOD_FAILED/code 99');
  assert.equal(errorName(OFP13_VERSION, { errorType: 42, errorCode: 7 }), 'type 42/code 7');
});

// Depends on: bundle.ts.
test('bundle control messages round-trip', () => {
  fc.assert(
    fc.property(
      fc.nat({ max: 0xffffffff }),
      fc.integer({ min: 0, max: 7 }),
      fc.integer({ min: 0, max: 3 }),
      (bundleId, type, flags) => {
        assert.deepEqual(decodeBundleCtrl(encodeBundleCtrl(bundleId, type, flags)), {
          bundleId,
          type,
          flags,
        });
      },
    ),
  );
});
