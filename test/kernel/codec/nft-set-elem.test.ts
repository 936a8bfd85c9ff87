/**
 * The nf_tables set element codec (nft-set-elem.ts) and the pod guard's keys: the bytes the kernel
 * compares with what `meta iifname . ether saddr . ...` loads into its registers. The kernel's side is
 * tested for real in test/datapath/linux-bridge-pod-guard.test.ts and spoofing.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { podGuardKeys } from '../../../src/datapath/linux-bridge/pod-guard.js';
import { encodeAttributes } from '../../../src/kernel/netlink/attributes.js';
import {
  concatKey,
  decodeCounterObj,
  decodeSetElemKeys,
  decodeSetElems,
  encodeSetElemList,
  encodeSetElemRanges,
  ifnameKey,
} from '../../../src/kernel/netlink/nft-set-elem.js';
import { NLA_F_NESTED } from '../../../src/kernel/netlink/uapi/netlink.js';
import * as T from '../../../src/kernel/netlink/uapi/nf-tables.js';

describe('nf_tables set elements', () => {
  test('a concatenated key pads each component to 32-bit registers', () => {
    const mac = Uint8Array.of(0x0a, 0x58, 1, 2, 3, 4);
    const key = concatKey([ifnameKey('pw1'), mac, Uint8Array.of(10, 0, 0, 1)]);
    assert.equal(key.length, 16 + 8 + 4);
    assert.deepEqual([...key.subarray(0, 4)], [0x70, 0x77, 0x31, 0]);
    assert.deepEqual([...key.subarray(16, 24)], [0x0a, 0x58, 1, 2, 3, 4, 0, 0]);
    assert.deepEqual([...key.subarray(24)], [10, 0, 0, 1]);
    assert.throws(() => ifnameKey('x'.repeat(16)), /too long/);
  });

  test('element lists survive encode -> decode', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 64 }), { maxLength: 12 }),
        fc.stringMatching(/^[a-z_]{1,20}$/),
        (keys, set) => {
          const decoded = decodeSetElemKeys(encodeSetElemList('t', set, keys));
          assert.equal(decoded.set, set);
          assert.deepEqual(decoded.keys, keys);
        },
      ),
    );
  });

  test('range elements (key and key end) survive encode -> decode', () => {
    const key = fc.uint8Array({ minLength: 4, maxLength: 40 });
    fc.assert(
      fc.property(
        fc.array(fc.record({ key, keyEnd: fc.option(key, { nil: undefined }) }), { maxLength: 12 }),
        (raw) => {
          const elems = raw.map((e) => (e.keyEnd ? { key: e.key, keyEnd: e.keyEnd } : { key: e.key }));
          const attrs = encodeSetElemRanges('t', 's', elems);
          assert.deepEqual(decodeSetElems(attrs), elems);
        },
      ),
    );
  });

  test("an element's counter expression, as a dump gives it, is read", () => {
    const be64 = (n: bigint) => {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigUint64(0, n, false);
      return b;
    };
    const nest = (type: number, attrs: Parameters<typeof encodeAttributes>[0]) => ({
      type: type | NLA_F_NESTED,
      value: encodeAttributes(attrs),
    });
    const counter = [
      { type: T.NFTA_EXPR_NAME, value: Buffer.from('counter\0') },
      nest(T.NFTA_EXPR_DATA, [
        { type: T.NFTA_COUNTER_BYTES, value: be64(1500n) },
        { type: T.NFTA_COUNTER_PACKETS, value: be64(7n) },
      ]),
    ];
    const attrs = encodeAttributes([
      { type: T.NFTA_SET_ELEM_LIST_TABLE, value: Buffer.from('t\0') },
      { type: T.NFTA_SET_ELEM_LIST_SET, value: Buffer.from('s\0') },
      nest(T.NFTA_SET_ELEM_LIST_ELEMENTS, [
        nest(T.NFTA_LIST_ELEM, [
          nest(T.NFTA_SET_ELEM_KEY, [{ type: T.NFTA_DATA_VALUE, value: Uint8Array.of(10, 0, 0, 1) }]),
          nest(T.NFTA_SET_ELEM_EXPR, counter),
        ]),
        nest(T.NFTA_LIST_ELEM, [
          nest(T.NFTA_SET_ELEM_KEY, [{ type: T.NFTA_DATA_VALUE, value: Uint8Array.of(10, 0, 0, 2) }]),
          nest(T.NFTA_SET_ELEM_EXPRESSIONS, [nest(T.NFTA_LIST_ELEM, counter)]),
        ]),
      ]),
    ]);
    assert.deepEqual(decodeSetElems(attrs), [
      { key: Uint8Array.of(10, 0, 0, 1), packets: 7n, bytes: 1500n },
      { key: Uint8Array.of(10, 0, 0, 2), packets: 7n, bytes: 1500n },
    ]);
  });

  test('a counter object: big-endian packets and bytes', () => {
    const be64 = (n: bigint) => {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigUint64(0, n, false);
      return b;
    };
    const attrs = encodeAttributes([
      { type: T.NFTA_OBJ_TABLE, value: Buffer.from('podwire_pod_guard\0') },
      { type: T.NFTA_OBJ_NAME, value: Buffer.from('ND_GUARD\0') },
      {
        type: T.NFTA_OBJ_DATA | NLA_F_NESTED,
        value: encodeAttributes([
          { type: T.NFTA_COUNTER_BYTES, value: be64(9000n) },
          { type: T.NFTA_COUNTER_PACKETS, value: be64(42n) },
        ]),
      },
    ]);
    assert.deepEqual(decodeCounterObj(attrs), {
      table: 'podwire_pod_guard',
      name: 'ND_GUARD',
      packets: 42n,
      bytes: 9000n,
    });
  });

  test("a pod's keys: IPv4 pods get no IPv6 elements; dual stack adds the link-local address", () => {
    const v4 = podGuardKeys({ hostIfname: 'pw1', mac: '0a:58:0a:00:00:05', ips: ['10.0.0.5'] });
    assert.deepEqual(
      v4.map((g) => [g.set, g.keys.length]),
      [
        ['pod_ports', 1],
        ['pod_arp', 2],
        ['pod_ip4', 1],
      ],
    );
    const dual = podGuardKeys({ hostIfname: 'pw1', mac: '0a:58:0a:00:00:05', ips: ['10.0.0.5', 'fd00::5'] });
    const ip6 = dual.find((g) => g.set === 'pod_ip6')?.keys ?? [];
    assert.equal(ip6.length, 2);
    // fe80::858:aff:fe00:5, after the name (16) and the padded MAC (8).
    assert.deepEqual(
      [...(ip6[1] ?? new Uint8Array()).subarray(24, 40)],
      [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x08, 0x58, 0x0a, 0xff, 0xfe, 0, 0, 5],
    );
    assert.equal(
      dual.reduce((n, g) => n + g.keys.length, 0),
      12,
    );
  });
});
