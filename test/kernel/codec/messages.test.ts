import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import * as Addr from '../../../src/kernel/netlink/addr-message.js';
import { decodeAttributes, encodeAttributes } from '../../../src/kernel/netlink/attributes.js';
import {
  concatBytes,
  decodeMessages,
  encodeMessage,
  encodeMessages,
} from '../../../src/kernel/netlink/codec.js';
import { NetlinkProtocolError } from '../../../src/kernel/netlink/errors.js';
import * as Link from '../../../src/kernel/netlink/link-message.js';
import * as Route from '../../../src/kernel/netlink/route-message.js';
import { NLA_F_NESTED } from '../../../src/kernel/netlink/uapi/netlink.js';
import * as R from '../../../src/kernel/netlink/uapi/rtnetlink.js';
import {
  addrBody,
  bytes,
  ifAddrMsg,
  ifInfoMsg,
  linkBody,
  record,
  routeBody,
  rtAttr,
  rtMsg,
  u16,
  u32,
} from './arbitraries.js';

const header = record({ type: u16, flags: u16, seq: u32, pid: u32 });

describe('nlmsghdr framing', () => {
  test('several messages in one datagram survive encode -> decode', () => {
    const messages = fc.array(record({ header, payload: bytes(64) }), { maxLength: 6 });
    fc.assert(
      fc.property(messages, (ms) => {
        const wire = encodeMessages(ms);
        assert.equal(wire.length % 4, 0);
        assert.deepStrictEqual(decodeMessages(wire), ms);
        assert.deepStrictEqual(encodeMessages(decodeMessages(wire)), wire);
      }),
      { numRuns: 200 },
    );
  });

  test('nlmsg_len counts the header and payload but not the padding', () => {
    const wire = encodeMessage({ type: R.RTM_GETLINK, flags: 5, seq: 9, pid: 0 }, Uint8Array.of(1, 2, 3));
    assert.equal(wire.length, 20);
    assert.deepStrictEqual(Array.from(wire.subarray(0, 4)), [19, 0, 0, 0]);
  });

  test('a length that overruns the datagram is a NetlinkProtocolError', () => {
    const wire = encodeMessage({ type: 16, flags: 0, seq: 1, pid: 0 }, new Uint8Array(8));
    assert.throws(() => decodeMessages(wire.subarray(0, 20)), NetlinkProtocolError);
    assert.throws(() => decodeMessages(wire.subarray(0, 10)), NetlinkProtocolError);
    const zero = new Uint8Array(16);
    assert.throws(() => decodeMessages(zero), NetlinkProtocolError);
  });
});

/** A body of a message family: its fixed header, then raw attributes. */
const families = [
  {
    name: 'ifinfomsg (RTM_*LINK)',
    fixed: ifInfoMsg.map(Link.encodeIfInfoMsg),
    decodeFixed: (b: Uint8Array) => Link.encodeIfInfoMsg(Link.decodeIfInfoMsg(b)),
    len: Link.IFINFOMSG_LEN,
  },
  {
    name: 'ifaddrmsg (RTM_*ADDR)',
    fixed: ifAddrMsg.map(Addr.encodeIfAddrMsg),
    decodeFixed: (b: Uint8Array) => Addr.encodeIfAddrMsg(Addr.decodeIfAddrMsg(b)),
    len: Addr.IFADDRMSG_LEN,
  },
  {
    name: 'rtmsg (RTM_*ROUTE)',
    fixed: rtMsg.map(Route.encodeRtMsg),
    decodeFixed: (b: Uint8Array) => Route.encodeRtMsg(Route.decodeRtMsg(b)),
    len: Route.RTMSG_LEN,
  },
];

describe('fixed headers with raw attributes: decode -> encode gives identical bytes', () => {
  for (const f of families) {
    test(f.name, () => {
      fc.assert(
        fc.property(f.fixed, fc.array(rtAttr, { maxLength: 6 }), u32, (fixed, attrs, seq) => {
          const wire = encodeMessage(
            { type: 16, flags: 2, seq, pid: 0 },
            concatBytes([fixed, encodeAttributes(attrs)]),
          );
          const [m] = decodeMessages(wire);
          assert.ok(m);
          const again = concatBytes([
            f.decodeFixed(m.payload),
            encodeAttributes(decodeAttributes(m.payload.subarray(f.len))),
          ]);
          assert.deepStrictEqual(encodeMessage(m.header, again), wire);
        }),
        { numRuns: 100 },
      );
    });
  }
});

describe('typed bodies: encode -> decode is the identity', () => {
  test('RTM_NEWLINK body, including a veth peer nest', () => {
    fc.assert(
      fc.property(linkBody, (body) => {
        assert.deepStrictEqual(Link.decodeLinkBody(Link.encodeLinkBody(body)), body);
      }),
      { numRuns: 200 },
    );
  });

  test('RTM_NEWADDR body', () => {
    fc.assert(
      fc.property(addrBody, (body) => {
        assert.deepStrictEqual(Addr.decodeAddrBody(Addr.encodeAddrBody(body)), body);
      }),
      { numRuns: 200 },
    );
  });

  test('RTM_NEWROUTE body', () => {
    fc.assert(
      fc.property(routeBody, (body) => {
        assert.deepStrictEqual(Route.decodeRouteBody(Route.encodeRouteBody(body)), body);
      }),
      { numRuns: 200 },
    );
  });

  test('a typed body decoded from its own bytes re-encodes to the same bytes', () => {
    fc.assert(
      fc.property(linkBody, addrBody, routeBody, (l, a, r) => {
        const lw = Link.encodeLinkBody(l);
        assert.deepStrictEqual(Link.encodeLinkBody(Link.decodeLinkBody(lw)), lw);
        const aw = Addr.encodeAddrBody(a);
        assert.deepStrictEqual(Addr.encodeAddrBody(Addr.decodeAddrBody(aw)), aw);
        const rw = Route.encodeRouteBody(r);
        assert.deepStrictEqual(Route.encodeRouteBody(Route.decodeRouteBody(rw)), rw);
      }),
      { numRuns: 100 },
    );
  });
});

describe('the veth request layout', () => {
  test('IFLA_LINKINFO { IFLA_INFO_KIND "veth", IFLA_INFO_DATA { VETH_INFO_PEER: ifinfomsg + IFLA_IFNAME + IFLA_NET_NS_FD } }', () => {
    const wire = Link.encodeLinkBody({
      ifi: Link.ifInfoMsg(),
      attrs: {
        ifname: 'veth0',
        mtu: 1400,
        linkinfo: { kind: 'veth', peer: { ifi: Link.ifInfoMsg(), attrs: { ifname: 'eth0', netNsFd: 7 } } },
      },
    });
    const attrs = decodeAttributes(wire.subarray(Link.IFINFOMSG_LEN));
    assert.deepStrictEqual(
      attrs.map((a) => a.type),
      [3, 4, 18 | NLA_F_NESTED],
    );
    const linkinfo = decodeAttributes((attrs[2] as { value: Uint8Array }).value);
    assert.deepStrictEqual(
      linkinfo.map((a) => a.type),
      [1, 2 | NLA_F_NESTED],
    );
    const data = decodeAttributes((linkinfo[1] as { value: Uint8Array }).value);
    assert.equal(data.length, 1);
    assert.equal(
      data[0]?.type,
      1,
      'VETH_INFO_PEER without NLA_F_NESTED: its payload starts with an ifinfomsg',
    );
    const peerValue = (data[0] as { value: Uint8Array }).value;
    assert.deepStrictEqual(peerValue.subarray(0, 16), new Uint8Array(16));
    assert.deepStrictEqual(
      decodeAttributes(peerValue.subarray(16)).map((a) => a.type),
      [3, 28],
    );
  });
});
