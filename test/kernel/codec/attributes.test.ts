import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import * as A from '../../../src/kernel/netlink/attributes.js';
import { dataView, HOST_LITTLE_ENDIAN } from '../../../src/kernel/netlink/codec.js';
import { NetlinkProtocolError } from '../../../src/kernel/netlink/errors.js';
import { NLA_F_NESTED, NLA_TYPE_MASK } from '../../../src/kernel/netlink/uapi/netlink.js';
import { type AttrTree, attrTree, bytes, cstr, i32, record, rtAttr, u8, u16, u32 } from './arbitraries.js';

function encodeTree(nodes: AttrTree[]): A.RtAttr[] {
  return nodes.map((n) =>
    'children' in n
      ? { type: n.type | NLA_F_NESTED, value: A.encodeAttributes(encodeTree(n.children)) }
      : { type: n.type, value: n.value },
  );
}

function decodeTree(buf: Uint8Array): AttrTree[] {
  return A.decodeAttributes(buf).map((a) =>
    A.isNested(a)
      ? { type: A.attrType(a), children: decodeTree(a.value) }
      : { type: a.type, value: new Uint8Array(a.value) },
  );
}

describe('rtattr', () => {
  test('nested trees survive encode -> decode', () => {
    fc.assert(
      fc.property(attrTree, (tree) => {
        assert.deepStrictEqual(decodeTree(A.encodeAttributes(encodeTree(tree))), tree);
      }),
      { numRuns: 200 },
    );
  });

  test('decode -> encode gives back identical bytes', () => {
    fc.assert(
      fc.property(fc.array(rtAttr, { maxLength: 8 }), (attrs) => {
        const wire = A.encodeAttributes(attrs);
        assert.deepStrictEqual(A.encodeAttributes(A.decodeAttributes(wire)), wire);
      }),
      { numRuns: 200 },
    );
  });

  test('every attribute starts on a 4-byte boundary and padding is zero', () => {
    fc.assert(
      fc.property(fc.array(rtAttr, { maxLength: 8 }), (attrs) => {
        const wire = A.encodeAttributes(attrs);
        assert.equal(wire.length % 4, 0);
        let off = 0;
        for (const a of attrs) {
          const len = 4 + a.value.length;
          assert.equal(dataView(wire).getUint16(off, HOST_LITTLE_ENDIAN), len);
          for (let i = off + len; i < off + ((len + 3) & ~3); i++) assert.equal(wire[i], 0);
          off += (len + 3) & ~3;
        }
      }),
      { numRuns: 100 },
    );
  });

  test('truncated or random input fails only with NetlinkProtocolError', () => {
    fc.assert(
      fc.property(fc.array(rtAttr, { minLength: 1, maxLength: 4 }), fc.nat(), (attrs, cut) => {
        const wire = A.encodeAttributes(attrs);
        const truncated = wire.subarray(0, cut % wire.length);
        try {
          const decoded = A.decodeAttributes(truncated);
          assert.ok(decoded.length <= attrs.length);
        } catch (err) {
          assert.ok(err instanceof NetlinkProtocolError, String(err));
        }
      }),
      { numRuns: 200 },
    );
    fc.assert(
      fc.property(bytes(64), (junk) => {
        try {
          A.decodeAttributes(junk);
        } catch (err) {
          assert.ok(err instanceof NetlinkProtocolError, String(err));
        }
      }),
      { numRuns: 200 },
    );
  });

  test('an attribute longer than 65535 bytes is refused', () => {
    assert.throws(
      () => A.encodeAttributes([{ type: 1, value: new Uint8Array(0x10000) }]),
      NetlinkProtocolError,
    );
  });

  test('attrType strips NLA_F_NESTED and NLA_F_NET_BYTEORDER; findAttr ignores them', () => {
    const a = { type: 5 | NLA_F_NESTED, value: new Uint8Array() };
    assert.equal(A.attrType(a), 5);
    assert.equal(A.attrType({ type: 0xffff, value: new Uint8Array() }), NLA_TYPE_MASK);
    assert.equal(A.findAttr([a], 5), a);
  });
});

describe('scalar attribute codecs', () => {
  const cases: [string, A.AttrCodec<never>, fc.Arbitrary<unknown>][] = [
    ['u8', A.u8 as A.AttrCodec<never>, u8],
    ['u16', A.u16 as A.AttrCodec<never>, u16],
    ['u32', A.u32 as A.AttrCodec<never>, u32],
    ['i32', A.i32 as A.AttrCodec<never>, i32],
    ['cstring', A.cstring as A.AttrCodec<never>, cstr],
    ['bytes', A.bytes as A.AttrCodec<never>, bytes()],
  ];
  for (const [name, codec, arb] of cases) {
    test(`${name} round trips`, () => {
      fc.assert(
        fc.property(arb, (v) => {
          assert.deepStrictEqual(codec.decode(codec.encode(v as never), 1), v);
        }),
        { numRuns: 100 },
      );
    });
  }

  test('integers of the wrong width are refused', () => {
    assert.throws(() => A.u32.decode(new Uint8Array(3), 4), NetlinkProtocolError);
    assert.throws(() => A.u8.decode(new Uint8Array(2), 16), NetlinkProtocolError);
  });

  test('cstring is NUL-terminated on the wire and read up to the first NUL', () => {
    assert.deepStrictEqual(A.cstring.encode('lo'), Uint8Array.of(0x6c, 0x6f, 0));
    assert.equal(A.cstring.decode(Uint8Array.of(0x6c, 0x6f, 0, 0x78), 3), 'lo');
    assert.equal(A.cstring.decode(Uint8Array.of(0x6c, 0x6f), 3), 'lo');
  });
});

describe('attribute schemas', () => {
  interface Sample {
    name?: string;
    mtu?: number;
    nest?: { a?: number; b?: string };
  }
  const schema: A.AttrSchema<Sample> = {
    name: { type: 3, codec: A.cstring },
    mtu: { type: 4, codec: A.u32 },
    nest: {
      type: 18,
      codec: A.nestedSchema({ a: { type: 1, codec: A.u32 }, b: { type: 2, codec: A.cstring } }),
    },
  };
  const sample = record(
    { name: cstr, mtu: u32, nest: record({ a: u32, b: cstr }, { requiredKeys: [] }) },
    { requiredKeys: [] },
  );

  test('encode -> decode is the identity, and nests carry NLA_F_NESTED', () => {
    fc.assert(
      fc.property(sample, (s) => {
        const attrs = A.encodeWithSchema(schema, s);
        const nest = A.findAttr(attrs, 18);
        if (nest !== undefined) assert.ok(A.isNested(nest));
        assert.deepStrictEqual(A.decodeWithSchema(schema, A.decodeAttributes(A.encodeAttributes(attrs))), s);
      }),
      { numRuns: 200 },
    );
  });

  test('unknown attributes are skipped and the first of duplicates wins', () => {
    fc.assert(
      fc.property(sample, fc.array(rtAttr, { maxLength: 5 }), (s, extra) => {
        const unknown = extra.map((a) => ({ type: 100 + (a.type % 100), value: a.value }));
        const attrs = [...A.encodeWithSchema(schema, s), ...unknown, { type: 4, value: A.u32.encode(7) }];
        const expected = { ...s, mtu: s.mtu ?? 7 };
        assert.deepStrictEqual(A.decodeWithSchema(schema, attrs), expected);
      }),
      { numRuns: 100 },
    );
  });
});
