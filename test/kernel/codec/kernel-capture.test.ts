/**
 * Decodes datagrams captured from a real kernel (fixtures/kernel-capture.ts) and compares the result
 * with what `ip -j` printed for the same namespace: iproute2 is the reference decoder.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AF_INET, AF_INET6 } from '../../../src/kernel/libc.js';
import * as AddrMsg from '../../../src/kernel/netlink/addr-message.js';
import { decodeAttributes, encodeAttributes } from '../../../src/kernel/netlink/attributes.js';
import {
  concatBytes,
  decodeMessages,
  encodeMessage,
  type NetlinkMessage,
} from '../../../src/kernel/netlink/codec.js';
import * as LinkMsg from '../../../src/kernel/netlink/link-message.js';
import { decodeDone, decodeNlMsgErr, encodeNlMsgErr } from '../../../src/kernel/netlink/nlmsgerr.js';
import * as RouteMsg from '../../../src/kernel/netlink/route-message.js';
import * as N from '../../../src/kernel/netlink/uapi/netlink.js';
import * as R from '../../../src/kernel/netlink/uapi/rtnetlink.js';
import { datagrams, ipJson } from './fixtures/kernel-capture.js';
import { addrKey, ipAddrKeys, ipLinkView, ipRouteView, linkView, routeView } from './ip-json.js';

function messagesOf(hexDatagrams: string[]): NetlinkMessage[] {
  return hexDatagrams.flatMap((h) => decodeMessages(Uint8Array.from(Buffer.from(h, 'hex'))));
}

/** The messages of a dump, after checking it ends with a clean NLMSG_DONE and every part is multipart. */
function dumpOf(hexDatagrams: string[], type: number): NetlinkMessage[] {
  const all = messagesOf(hexDatagrams);
  const done = all.at(-1);
  assert.ok(done && done.header.type === N.NLMSG_DONE);
  assert.equal(decodeDone(done).error, 0);
  const body = all.slice(0, -1);
  for (const m of body) {
    assert.equal(m.header.type, type);
    assert.ok(m.header.flags & N.NLM_F_MULTI);
    assert.equal(m.header.seq, done.header.seq);
  }
  return body;
}

const links = dumpOf(datagrams.links, R.RTM_NEWLINK).map((m) =>
  LinkMsg.linkFromBody(LinkMsg.decodeLinkBody(m.payload)),
);

describe('a kernel dump decodes to what ip -j shows', () => {
  test('links', () => {
    assert.deepStrictEqual(
      links.map((l) => linkView(l, links)),
      ipJson.link.map((e) => ipLinkView(e)),
    );
    const veth = links.find((l) => l.name === 'veth0');
    assert.equal(veth?.kind, 'veth');
    assert.equal(veth?.linkIndex, 2);
    assert.equal(veth?.linkNetnsId, 0);
    assert.equal(veth?.masterIndex, links.find((l) => l.name === 'br0')?.index);
  });

  test('addresses', () => {
    const addrs = dumpOf(datagrams.addrs, R.RTM_NEWADDR).map((m) =>
      AddrMsg.addrFromBody(AddrMsg.decodeAddrBody(m.payload)),
    );
    assert.deepStrictEqual(addrs.map(addrKey).sort(), ipAddrKeys(ipJson.addr));
    const v6 = addrs.find((a) => a.address === 'fd00::1');
    assert.ok(v6 && v6.flags & 0x02, 'IFA_F_NODAD read from IFA_FLAGS');
    assert.equal(addrs.find((a) => a.address === '10.1.0.1')?.label, 'br0');
  });

  for (const [name, family, hex, reference] of [
    ['IPv4 routes (main table)', AF_INET, datagrams.routes4, ipJson.route4],
    ['IPv6 routes (main table)', AF_INET6, datagrams.routes6, ipJson.route6],
  ] as const) {
    test(name, () => {
      const routes = dumpOf([...hex], R.RTM_NEWROUTE)
        .map((m) => RouteMsg.routeFromBody(RouteMsg.decodeRouteBody(m.payload)))
        .filter((r) => r.table === R.RT_TABLE_MAIN);
      assert.ok(routes.every((r) => r.family === family));
      const ours = routes.map((r) => JSON.stringify(routeView(r, links))).sort();
      const theirs = reference.map((e) => JSON.stringify(ipRouteView(e))).sort();
      assert.deepStrictEqual(ours, theirs);
    });
  }
});

/** Re-encodes a message from its decoded parts: the fixed header and the attribute list. */
function reencode(m: NetlinkMessage): Uint8Array {
  const fixed = (len: number, roundTrip: (b: Uint8Array) => Uint8Array) =>
    concatBytes([roundTrip(m.payload), encodeAttributes(decodeAttributes(m.payload.subarray(len)))]);
  switch (m.header.type) {
    case R.RTM_NEWLINK:
      return encodeMessage(
        m.header,
        fixed(LinkMsg.IFINFOMSG_LEN, (b) => LinkMsg.encodeIfInfoMsg(LinkMsg.decodeIfInfoMsg(b))),
      );
    case R.RTM_NEWADDR:
      return encodeMessage(
        m.header,
        fixed(AddrMsg.IFADDRMSG_LEN, (b) => AddrMsg.encodeIfAddrMsg(AddrMsg.decodeIfAddrMsg(b))),
      );
    case R.RTM_NEWROUTE:
      return encodeMessage(
        m.header,
        fixed(RouteMsg.RTMSG_LEN, (b) => RouteMsg.encodeRtMsg(RouteMsg.decodeRtMsg(b))),
      );
    case N.NLMSG_ERROR: {
      const { flags, payload } = encodeNlMsgErr(decodeNlMsgErr(m));
      assert.equal(flags, m.header.flags);
      return encodeMessage(m.header, payload);
    }
    default:
      return encodeMessage(m.header, m.payload);
  }
}

test('every captured datagram re-encodes from its decoded parts to identical bytes', () => {
  for (const [name, list] of Object.entries(datagrams)) {
    for (const h of list) {
      const wire = Uint8Array.from(Buffer.from(h, 'hex'));
      assert.deepStrictEqual(concatBytes(decodeMessages(wire).map(reencode)), wire, name);
    }
  }
});

describe('kernel error answers', () => {
  const only = (hex: string[]) => {
    const ms = messagesOf(hex);
    assert.equal(ms.length, 1);
    const [m] = ms;
    assert.ok(m && m.header.type === N.NLMSG_ERROR);
    return { m, e: decodeNlMsgErr(m) };
  };

  test('EEXIST for a duplicate veth echoes the whole request (no NETLINK_CAP_ACK)', () => {
    const { m, e } = only(datagrams.errorEexist);
    assert.equal(e.error, -17);
    assert.equal(m.header.flags & N.NLM_F_CAPPED, 0);
    assert.equal(e.request.type, R.RTM_NEWLINK);
    assert.equal(e.request.seq, m.header.seq);
    assert.ok(e.requestPayload);
    const echoed = LinkMsg.decodeLinkBody(e.requestPayload);
    assert.equal(echoed.attrs.ifname, 'veth0');
    assert.equal(echoed.attrs.linkinfo?.peer?.attrs.ifname, 'x0');
  });

  test('EINVAL with the extended-ack text, uncapped and capped', () => {
    for (const hex of [datagrams.errorMtuUncapped, datagrams.errorMtuCapped]) {
      const { e } = only(hex);
      assert.equal(e.error, -22);
      assert.equal(e.request.type, R.RTM_SETLINK);
      assert.equal(e.extack.msg, 'mtu greater than device maximum');
    }
    assert.ok(only(datagrams.errorMtuCapped).m.header.flags & N.NLM_F_CAPPED);
    assert.equal(only(datagrams.errorMtuUncapped).e.requestPayload?.length, 24);
  });

  test('a positive ack is capped and carries error 0', () => {
    const { m, e } = only(datagrams.ack);
    assert.equal(e.error, 0);
    assert.equal(m.header.flags, N.NLM_F_CAPPED);
    assert.equal(e.requestPayload, undefined);
  });
});
