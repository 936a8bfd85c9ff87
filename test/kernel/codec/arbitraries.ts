/** fast-check generators for netlink structures. Pure; importing it has no side effects. */
import fc from 'fast-check';
import type { AddrAttributes, AddrBody, IfAddrMsg } from '../../../src/kernel/netlink/addr-message.js';
import type { RtAttr } from '../../../src/kernel/netlink/attributes.js';
import type {
  IfInfoMsg,
  LinkAttributes,
  LinkBody,
  LinkInfo,
} from '../../../src/kernel/netlink/link-message.js';
import type { RouteAttributes, RouteBody, RtMsg } from '../../../src/kernel/netlink/route-message.js';

/** fc.record with ordinary prototypes, so that deepStrictEqual can compare it with decoded objects. */
export const record: typeof fc.record = ((model: never, constraints?: object) =>
  fc.record(model, { ...constraints, noNullPrototype: true } as never)) as typeof fc.record;

export const u8 = fc.integer({ min: 0, max: 0xff });
export const u16 = fc.integer({ min: 0, max: 0xffff });
export const u32 = fc.integer({ min: 0, max: 0xffffffff });
export const i32 = fc.integer({ min: -0x80000000, max: 0x7fffffff });
/** Printable ASCII without NUL, as interface names and labels are. */
export const cstr = fc.string({ maxLength: 20 });
export const bytes = (maxLength = 24) => fc.uint8Array({ maxLength });
export const ip = fc.oneof(
  fc.uint8Array({ minLength: 4, maxLength: 4 }),
  fc.uint8Array({ minLength: 16, maxLength: 16 }),
);

/** A flat attribute with any type (flag bits included) and value. */
export const rtAttr: fc.Arbitrary<RtAttr> = record({ type: u16, value: bytes(40) });

/** A tree of attributes: a nested node's children are encoded into its value with NLA_F_NESTED. */
export type AttrTree = { type: number; value: Uint8Array } | { type: number; children: AttrTree[] };

const { node: attrNode } = fc.letrec<{ node: AttrTree }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    record({ type: fc.integer({ min: 0, max: 0x3fff }), value: bytes(40) }),
    record({ type: fc.integer({ min: 0, max: 0x3fff }), children: fc.array(tie('node'), { maxLength: 4 }) }),
  ),
}));

export const attrTree: fc.Arbitrary<AttrTree[]> = fc.array(attrNode, { maxLength: 5 });

export const ifInfoMsg: fc.Arbitrary<IfInfoMsg> = record({
  family: u8,
  type: u16,
  index: i32,
  flags: u32,
  change: u32,
});

const linkScalars = {
  address: bytes(8),
  broadcast: bytes(8),
  ifname: cstr,
  mtu: u32,
  link: u32,
  master: u32,
  txqlen: u32,
  operstate: u8,
  linkmode: u8,
  netNsPid: u32,
  group: u32,
  netNsFd: u32,
  extMask: u32,
  promiscuity: u32,
  carrier: u8,
  linkNetnsid: i32,
  minMtu: u32,
  maxMtu: u32,
};

const plainLinkAttributes: fc.Arbitrary<LinkAttributes> = record(linkScalars, { requiredKeys: [] });

const linkInfo: fc.Arbitrary<LinkInfo> = fc.oneof(
  record(
    {
      kind: fc.constant('veth'),
      peer: record({ ifi: ifInfoMsg, attrs: plainLinkAttributes }),
      slaveKind: cstr,
      slaveData: fc.array(rtAttr, { maxLength: 3 }),
    },
    { requiredKeys: ['kind'] },
  ),
  record(
    {
      kind: fc.constantFrom('bridge', 'dummy', 'vxlan'),
      data: fc.array(rtAttr, { maxLength: 3 }),
      slaveKind: cstr,
      slaveData: fc.array(rtAttr, { maxLength: 3 }),
    },
    { requiredKeys: [] },
  ),
);

export const linkBody: fc.Arbitrary<LinkBody> = record({
  ifi: ifInfoMsg,
  attrs: record({ ...linkScalars, linkinfo: linkInfo }, { requiredKeys: [] }),
});

export const ifAddrMsg: fc.Arbitrary<IfAddrMsg> = record({
  family: u8,
  prefixlen: u8,
  flags: u8,
  scope: u8,
  index: u32,
});

export const addrBody: fc.Arbitrary<AddrBody> = record({
  ifa: ifAddrMsg,
  attrs: record(
    {
      address: ip,
      local: ip,
      label: cstr,
      broadcast: ip,
      cacheinfo: record({ preferred: u32, valid: u32, cstamp: u32, tstamp: u32 }),
      flags: u32,
      rtPriority: u32,
      proto: u8,
    },
    { requiredKeys: [] },
  ) as fc.Arbitrary<AddrAttributes>,
});

export const rtMsg: fc.Arbitrary<RtMsg> = record({
  family: u8,
  dstLen: u8,
  srcLen: u8,
  tos: u8,
  table: u8,
  protocol: u8,
  scope: u8,
  type: u8,
  flags: u32,
});

export const routeBody: fc.Arbitrary<RouteBody> = record({
  rtm: rtMsg,
  attrs: record(
    {
      dst: ip,
      src: ip,
      iif: u32,
      oif: u32,
      gateway: ip,
      priority: u32,
      prefsrc: ip,
      metrics: fc.array(rtAttr, { maxLength: 3 }),
      table: u32,
      pref: u8,
    },
    { requiredKeys: [] },
  ) as fc.Arbitrary<RouteAttributes>,
});
