/**
 * The codecs of cross-node overlay messages: struct ndmsg bodies (neighbours and fdb entries) and the
 * IFLA_INFO_DATA of a vxlan link. Random round trips, the byte layout the kernel expects, and the
 * views (`Neigh`, `FdbEntry`, `Link.vxlan`) of decoded bodies.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { formatIpBytes } from '../../../src/base/ip.js';
import { formatMac } from '../../../src/base/mac.js';
import { AF_INET } from '../../../src/kernel/libc.js';
import { attrType, decodeAttributes, findAttr } from '../../../src/kernel/netlink/attributes.js';
import { HOST_LITTLE_ENDIAN } from '../../../src/kernel/netlink/codec.js';
import { NetlinkProtocolError } from '../../../src/kernel/netlink/errors.js';
import * as Link from '../../../src/kernel/netlink/link-message.js';
import * as Neigh from '../../../src/kernel/netlink/neigh-message.js';
import * as L from '../../../src/kernel/netlink/uapi/if-link.js';
import * as N from '../../../src/kernel/netlink/uapi/neighbour.js';
import { NLA_F_NESTED } from '../../../src/kernel/netlink/uapi/netlink.js';
import * as V from '../../../src/kernel/netlink/uapi/vxlan.js';
import {
  decodeVxlanData,
  encodeVxlanData,
  type VxlanAttributes,
  vxlanLinkAttributes,
} from '../../../src/kernel/netlink/vxlan-data.js';
import { i32, ip, record, u8, u16, u32 } from './arbitraries.js';

const ndMsg: fc.Arbitrary<Neigh.NdMsg> = record({ family: u8, index: i32, state: u16, flags: u8, type: u8 });
const mac = fc.uint8Array({ minLength: 6, maxLength: 6 });

const neighBody: fc.Arbitrary<Neigh.NeighBody> = record({
  ndm: ndMsg,
  attrs: record(
    {
      dst: ip,
      lladdr: mac,
      cacheinfo: record({ confirmed: u32, used: u32, updated: u32, refcnt: u32 }),
      probes: u32,
      vlan: u16,
      port: u16,
      vni: u32,
      ifindex: u32,
      master: u32,
      linkNetnsid: i32,
      srcVni: u32,
      protocol: u8,
      nhId: u32,
      flagsExt: u32,
    },
    { requiredKeys: [] },
  ) as fc.Arbitrary<Neigh.NeighAttributes>,
});

const vxlanAttributes: fc.Arbitrary<VxlanAttributes> = record(
  {
    id: u32,
    group: fc.uint8Array({ minLength: 4, maxLength: 4 }),
    link: u32,
    local: fc.uint8Array({ minLength: 4, maxLength: 4 }),
    ttl: u8,
    tos: u8,
    learning: u8,
    ageing: u32,
    port: u16,
    group6: fc.uint8Array({ minLength: 16, maxLength: 16 }),
    local6: fc.uint8Array({ minLength: 16, maxLength: 16 }),
  },
  { requiredKeys: [] },
);

describe('struct ndmsg bodies (RTM_*NEIGH)', () => {
  test('encode -> decode is the identity, and decoded bytes re-encode to the same bytes', () => {
    fc.assert(
      fc.property(neighBody, (body) => {
        const wire = Neigh.encodeNeighBody(body);
        assert.equal(wire.length % 4, 0);
        assert.deepStrictEqual(Neigh.decodeNeighBody(wire), body);
        assert.deepStrictEqual(Neigh.encodeNeighBody(Neigh.decodeNeighBody(wire)), wire);
      }),
      { numRuns: 200 },
    );
  });

  test('layout: family, 3 pad bytes, s32 ifindex, u16 state, u8 flags, u8 type', () => {
    const wire = Neigh.encodeNdMsg({
      family: N.AF_BRIDGE,
      index: 0x01020304,
      state: N.NUD_PERMANENT,
      flags: N.NTF_SELF,
      type: 1,
    });
    const le = [7, 0, 0, 0, 4, 3, 2, 1, 0x80, 0, 2, 1];
    const be = [7, 0, 0, 0, 1, 2, 3, 4, 0, 0x80, 2, 1];
    assert.deepStrictEqual(Array.from(wire), HOST_LITTLE_ENDIAN ? le : be);
    assert.deepStrictEqual(Neigh.decodeNdMsg(wire).index, 0x01020304);
    assert.throws(() => Neigh.decodeNdMsg(wire.subarray(0, 11)), NetlinkProtocolError);
  });

  test('NDA_PORT is big-endian whatever the host', () => {
    const wire = Neigh.encodeNeighBody({ ndm: Neigh.ndMsg(), attrs: { port: 4789 } });
    const [port] = decodeAttributes(wire.subarray(Neigh.NDMSG_LEN));
    assert.equal(port && attrType(port), N.NDA_PORT);
    assert.deepStrictEqual(Array.from(port?.value ?? []), [0x12, 0xb5]);
  });

  test('the Neigh view: address and MAC as text, state and flags as the kernel sent them', () => {
    fc.assert(
      fc.property(ndMsg, ip, fc.option(mac, { nil: undefined }), (ndm, dst, lladdr) => {
        const body = { ndm, attrs: lladdr === undefined ? { dst } : { dst, lladdr } };
        const neigh = Neigh.neighFromBody(Neigh.decodeNeighBody(Neigh.encodeNeighBody(body)));
        const expected: Record<string, unknown> = {
          index: ndm.index,
          family: ndm.family,
          address: formatIpBytes(dst),
          state: ndm.state,
          flags: ndm.flags,
        };
        if (lladdr !== undefined) expected.mac = formatMac(lladdr);
        assert.deepStrictEqual(neigh, expected);
      }),
      { numRuns: 100 },
    );
    assert.throws(
      () => Neigh.neighFromBody({ ndm: Neigh.ndMsg({ family: AF_INET }), attrs: {} }),
      NetlinkProtocolError,
    );
  });

  test('the FdbEntry view: a vxlan remote with its own port and VNI', () => {
    const body = Neigh.decodeNeighBody(
      Neigh.encodeNeighBody({
        ndm: Neigh.ndMsg({ family: N.AF_BRIDGE, index: 9, state: N.NUD_PERMANENT, flags: N.NTF_SELF }),
        attrs: {
          lladdr: Uint8Array.of(2, 0, 0, 0, 0, 0xb),
          dst: Uint8Array.of(192, 168, 77, 2),
          port: 8472,
          vni: 7,
        },
      }),
    );
    assert.deepStrictEqual(Neigh.fdbFromBody(body), {
      index: 9,
      mac: '02:00:00:00:00:0b',
      dst: '192.168.77.2',
      state: N.NUD_PERMANENT,
      flags: N.NTF_SELF,
      vni: 7,
      port: 8472,
    });
    assert.throws(
      () => Neigh.fdbFromBody({ ndm: Neigh.ndMsg({ family: N.AF_BRIDGE }), attrs: {} }),
      NetlinkProtocolError,
    );
  });
});

describe('IFLA_INFO_DATA of a vxlan link', () => {
  test('IFLA_VXLAN_* encode -> decode is the identity', () => {
    fc.assert(
      fc.property(vxlanAttributes, (attrs) => {
        assert.deepStrictEqual(decodeVxlanData(encodeVxlanData(attrs)), attrs);
      }),
      { numRuns: 200 },
    );
  });

  test('the request of `ip link add vx0 mtu 1450 type vxlan id 42 dstport 4789 local 192.168.77.1 dev 3 nolearning`', () => {
    const wire = Link.encodeLinkBody({
      ifi: Link.ifInfoMsg(),
      attrs: vxlanLinkAttributes({
        name: 'vx0',
        vni: 42,
        port: V.IANA_VXLAN_UDP_PORT,
        local: '192.168.77.1',
        underlayIndex: 3,
        mtu: 1450,
      }),
    });
    const attrs = decodeAttributes(wire.subarray(Link.IFINFOMSG_LEN));
    const linkinfo = findAttr(attrs, L.IFLA_LINKINFO);
    assert.ok(linkinfo);
    const info = decodeAttributes(linkinfo.value);
    assert.deepStrictEqual(Array.from(findAttr(info, L.IFLA_INFO_KIND)?.value ?? []), [
      ...Buffer.from('vxlan'),
      0,
    ]);
    const dataAttr = findAttr(info, L.IFLA_INFO_DATA);
    assert.ok(dataAttr && (dataAttr.type & NLA_F_NESTED) !== 0);
    const data = decodeAttributes(dataAttr.value);
    const value = (type: number) => Array.from(findAttr(data, type)?.value ?? []);
    // Host-order u32s, a network-order port, and learning explicitly off (the kernel defaults to on).
    assert.deepStrictEqual(value(V.IFLA_VXLAN_ID), HOST_LITTLE_ENDIAN ? [42, 0, 0, 0] : [0, 0, 0, 42]);
    assert.deepStrictEqual(value(V.IFLA_VXLAN_PORT), [0x12, 0xb5]);
    assert.deepStrictEqual(value(V.IFLA_VXLAN_LEARNING), [0]);
    assert.deepStrictEqual(value(V.IFLA_VXLAN_LOCAL), [192, 168, 77, 1]);
    assert.deepStrictEqual(value(V.IFLA_VXLAN_LINK), HOST_LITTLE_ENDIAN ? [3, 0, 0, 0] : [0, 0, 0, 3]);
    assert.equal(findAttr(data, V.IFLA_VXLAN_LOCAL6), undefined);
    const v6 = decodeVxlanData(
      vxlanLinkAttributes({ name: 'vx6', vni: 1, port: 4789, local: 'fd00::1', mtu: 1430 }).linkinfo?.data ??
        [],
    );
    assert.equal(v6.local, undefined);
    assert.equal(v6.local6 && formatIpBytes(v6.local6), 'fd00::1');
  });

  test('a vxlan link body survives the RTM_NEWLINK codec, and Link.vxlan reads back the spec', () => {
    const spec = record(
      {
        name: fc.constantFrom('vx0', 'flannel.1'),
        vni: fc.integer({ min: 0, max: 0xffffff }),
        port: fc.integer({ min: 1, max: 0xffff }),
        local: fc.oneof(fc.ipV4(), fc.constantFrom('fd00::1', '2001:db8::77')),
        underlayIndex: fc.integer({ min: 1, max: 0x7fffffff }),
        mtu: fc.integer({ min: 68, max: 9000 }),
        mac: mac.map(formatMac),
        learning: fc.boolean(),
      },
      { requiredKeys: ['name', 'vni', 'port', 'mtu'] },
    );
    fc.assert(
      fc.property(spec, (s) => {
        const body = { ifi: Link.ifInfoMsg(), attrs: vxlanLinkAttributes(s) };
        const decoded = Link.decodeLinkBody(Link.encodeLinkBody(body));
        assert.deepStrictEqual(decoded, body);
        const link = Link.linkFromBody(decoded);
        const expected: Record<string, unknown> = { vni: s.vni, port: s.port, learning: s.learning ?? false };
        if (s.local !== undefined) expected.local = s.local;
        if (s.underlayIndex !== undefined) expected.underlayIndex = s.underlayIndex;
        assert.deepStrictEqual(link.vxlan, expected);
        assert.equal(link.kind, 'vxlan');
        assert.equal(link.mtu, s.mtu);
      }),
      { numRuns: 200 },
    );
  });
});
