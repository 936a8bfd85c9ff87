import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { encodeAttributes } from '../../../src/kernel/netlink/attributes.js';
import {
  concatBytes,
  dataView,
  decodeMessages,
  encodeMessage,
  HOST_LITTLE_ENDIAN,
} from '../../../src/kernel/netlink/codec.js';
import { NetlinkProtocolError } from '../../../src/kernel/netlink/errors.js';
import {
  decodeDone,
  decodeNlMsgErr,
  encodeNlMsgErr,
  type NlMsgErr,
} from '../../../src/kernel/netlink/nlmsgerr.js';
import * as N from '../../../src/kernel/netlink/uapi/netlink.js';
import { bytes, cstr, i32, record, u16, u32 } from './arbitraries.js';

const extack = record(
  {
    msg: cstr,
    offset: u32,
    cookie: bytes(8),
    policy: fc.array(record({ type: u16, value: bytes(8) }), { maxLength: 2 }),
    missType: u32,
    missNest: u32,
  },
  { requiredKeys: [] },
);

const nlmsgerr: fc.Arbitrary<NlMsgErr> = fc.oneof(
  // Capped: only the request's header is echoed, its nlmsg_len may be anything.
  record({ error: i32, request: record({ len: u32, type: u16, flags: u16, seq: u32, pid: u32 }), extack }),
  // Uncapped: the request's payload follows, and nlmsg_len says how long it is.
  record({
    error: i32,
    request: record({ type: u16, flags: u16, seq: u32, pid: u32 }),
    requestPayload: bytes(40),
    extack,
  }).map((e) => ({ ...e, request: { ...e.request, len: N.NLMSG_HDRLEN + e.requestPayload.length } })),
);

function errorMessage(e: NlMsgErr, seq = 1): Uint8Array {
  const { flags, payload } = encodeNlMsgErr(e);
  return encodeMessage({ type: N.NLMSG_ERROR, flags, seq, pid: 4242 }, payload);
}

describe('NLMSG_ERROR', () => {
  test('encode -> decode is the identity, capped or not, with or without extended ack', () => {
    fc.assert(
      fc.property(nlmsgerr, (e) => {
        const [m] = decodeMessages(errorMessage(e));
        assert.ok(m);
        assert.equal(m.header.type, N.NLMSG_ERROR);
        assert.deepStrictEqual(decodeNlMsgErr(m), e);
      }),
      { numRuns: 200 },
    );
  });

  test('NLM_F_CAPPED and NLM_F_ACK_TLVS follow the content', () => {
    const request = { len: 40, type: 16, flags: 0x605, seq: 7, pid: 0 };
    assert.equal(encodeNlMsgErr({ error: 0, request, extack: {} }).flags, N.NLM_F_CAPPED);
    assert.equal(
      encodeNlMsgErr({ error: -22, request, extack: { msg: 'x' } }).flags,
      N.NLM_F_CAPPED | N.NLM_F_ACK_TLVS,
    );
    assert.equal(
      encodeNlMsgErr({ error: -17, request, requestPayload: new Uint8Array(24), extack: {} }).flags,
      0,
    );
  });

  test('the extended ack text is found after an echoed request (hand-built as the kernel lays it out)', () => {
    // struct nlmsgerr { int error; struct nlmsghdr msg; } + 5 bytes of request payload + 3 of padding,
    // then NLMSGERR_ATTR_MSG and NLMSGERR_ATTR_OFFS.
    const head = new Uint8Array(20);
    const v = dataView(head);
    v.setInt32(0, -22, HOST_LITTLE_ENDIAN);
    v.setUint32(4, 21, HOST_LITTLE_ENDIAN);
    v.setUint16(8, 19, HOST_LITTLE_ENDIAN);
    v.setUint32(12, 99, HOST_LITTLE_ENDIAN);
    const requestPayload = Uint8Array.of(1, 2, 3, 4, 5, 0, 0, 0);
    const tlv = encodeAttributes([
      { type: N.NLMSGERR_ATTR_MSG, value: Buffer.from('mtu greater than device maximum\0') },
      { type: N.NLMSGERR_ATTR_OFFS, value: Uint8Array.of(20, 0, 0, 0) },
    ]);
    const wire = encodeMessage(
      { type: N.NLMSG_ERROR, flags: N.NLM_F_ACK_TLVS, seq: 99, pid: 1 },
      concatBytes([head, requestPayload, tlv]),
    );
    const [m] = decodeMessages(wire);
    assert.ok(m);
    const e = decodeNlMsgErr(m);
    assert.equal(e.error, -22);
    assert.equal(e.request.seq, 99);
    assert.deepStrictEqual(e.requestPayload, Uint8Array.of(1, 2, 3, 4, 5));
    assert.deepStrictEqual(e.extack, { msg: 'mtu greater than device maximum', offset: 20 });
  });

  test('an error too short for struct nlmsgerr, or echoing a request that does not fit, is refused', () => {
    const short = { header: { type: N.NLMSG_ERROR, flags: 0, seq: 0, pid: 0 }, payload: new Uint8Array(12) };
    assert.throws(() => decodeNlMsgErr(short), NetlinkProtocolError);
    const e = encodeNlMsgErr({
      error: -1,
      request: { len: 16, type: 1, flags: 0, seq: 0, pid: 0 },
      extack: {},
    });
    const lying = new Uint8Array(e.payload);
    dataView(lying).setUint32(4, 400, HOST_LITTLE_ENDIAN);
    const m = { header: { type: N.NLMSG_ERROR, flags: 0, seq: 0, pid: 0 }, payload: lying };
    assert.throws(() => decodeNlMsgErr(m), NetlinkProtocolError);
  });
});

describe('NLMSG_DONE', () => {
  test('carries 0, or the error that ended the dump with its extended ack', () => {
    const ok = {
      header: { type: N.NLMSG_DONE, flags: N.NLM_F_MULTI, seq: 1, pid: 1 },
      payload: new Uint8Array(4),
    };
    assert.deepStrictEqual(decodeDone(ok), { error: 0, extack: {} });
    const body = concatBytes([
      Uint8Array.of(0xea, 0xff, 0xff, 0xff),
      encodeAttributes([{ type: N.NLMSGERR_ATTR_MSG, value: Buffer.from('bad filter\0') }]),
    ]);
    const failed = {
      header: { type: N.NLMSG_DONE, flags: N.NLM_F_MULTI | N.NLM_F_ACK_TLVS, seq: 1, pid: 1 },
      payload: body,
    };
    assert.deepStrictEqual(decodeDone(failed), { error: -22, extack: { msg: 'bad filter' } });
    const empty = { header: { type: N.NLMSG_DONE, flags: 0, seq: 1, pid: 1 }, payload: new Uint8Array(0) };
    assert.deepStrictEqual(decodeDone(empty), { error: 0, extack: {} });
  });
});
