/**
 * tc-message.ts without a kernel: the bytes of the ingress qdisc and the redirect filter as `tc`
 * sends them (struct tcmsg, the u32 selector, act_mirred's struct tc_mirred), and the dump's decoding
 * (the real kernel's answer is in test/kernel/netlink/tc.test.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { decodeAttributes, encodeAttributes, findAttr } from '../../../src/kernel/netlink/attributes.js';
import { dataView, HOST_LITTLE_ENDIAN } from '../../../src/kernel/netlink/codec.js';
import { NetlinkProtocolError } from '../../../src/kernel/netlink/errors.js';
import {
  decodeFilter,
  decodeTcMsg,
  encodeTcMsg,
  ingressFilterDumpBody,
  ingressQdiscBody,
  ingressRedirectFilterBody,
  isRedirectAllTo,
  TCMSG_LEN,
} from '../../../src/kernel/netlink/tc-message.js';
import * as T from '../../../src/kernel/netlink/uapi/tc.js';
import { u32 } from './arbitraries.js';

const u32At = (b: Uint8Array, off: number) => dataView(b).getUint32(off, HOST_LITTLE_ENDIAN);
const text = (b: Uint8Array | undefined) => Buffer.from(b ?? []).toString('latin1');

test('struct tcmsg: 20 bytes, fields round-trip', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 0x7fffffff }), u32, u32, u32, (ifindex, handle, parent, info) => {
      const b = encodeTcMsg({ ifindex, handle, parent, info });
      assert.equal(b.length, TCMSG_LEN);
      assert.equal(b[0], 0, 'tcm_family AF_UNSPEC');
      assert.deepEqual(decodeTcMsg(b), { ifindex, handle, parent, info });
    }),
  );
  assert.throws(() => decodeTcMsg(new Uint8Array(19)), NetlinkProtocolError);
});

test('the ingress qdisc: parent TC_H_INGRESS, handle ffff:, kind "ingress", empty options', () => {
  const b = ingressQdiscBody(7);
  assert.deepEqual(decodeTcMsg(b), { ifindex: 7, handle: 0xffff0000, parent: 0xfffffff1, info: 0 });
  const attrs = decodeAttributes(b.subarray(TCMSG_LEN));
  assert.equal(text(findAttr(attrs, T.TCA_KIND)?.value), 'ingress\0');
  assert.equal(findAttr(attrs, T.TCA_OPTIONS)?.value.length, 0);
});

test('the redirect filter: prio 1, protocol all, u32 with one key of mask 0, mirred egress redirect, stolen', () => {
  const b = ingressRedirectFilterBody(7, 42);
  const t = decodeTcMsg(b);
  assert.equal(t.ifindex, 7);
  assert.equal(t.parent, 0xffff0000);
  assert.equal(t.info >>> 16, 1, 'prio');
  // The protocol is in network byte order within tcm_info: 00 03 in memory.
  assert.deepEqual([...b.subarray(16, 18)], [0x00, 0x03]);
  const attrs = decodeAttributes(b.subarray(TCMSG_LEN));
  assert.equal(text(findAttr(attrs, T.TCA_KIND)?.value), 'u32\0');
  const options = decodeAttributes(findAttr(attrs, T.TCA_OPTIONS)?.value ?? new Uint8Array());
  const sel = findAttr(options, T.TCA_U32_SEL)?.value;
  assert.ok(sel);
  assert.equal(sel.length, 32, 'struct tc_u32_sel and one struct tc_u32_key');
  assert.equal(sel[0], T.TC_U32_TERMINAL);
  assert.equal(sel[2], 1, 'nkeys');
  assert.ok(
    sel.subarray(16).every((x) => x === 0),
    'the key: mask 0, value 0, offset 0',
  );
  const [first, ...more] = decodeAttributes(findAttr(options, T.TCA_U32_ACT)?.value ?? new Uint8Array());
  assert.equal(more.length, 0);
  const act = decodeAttributes(first?.value ?? new Uint8Array());
  assert.equal(text(findAttr(act, T.TCA_ACT_KIND)?.value), 'mirred\0');
  const parms = findAttr(
    decodeAttributes(findAttr(act, T.TCA_ACT_OPTIONS)?.value ?? new Uint8Array()),
    T.TCA_MIRRED_PARMS,
  )?.value;
  assert.ok(parms);
  assert.equal(parms.length, 28, 'struct tc_mirred');
  assert.equal(u32At(parms, 8), T.TC_ACT_STOLEN);
  assert.equal(u32At(parms, 20), T.TCA_EGRESS_REDIR);
  assert.equal(u32At(parms, 24), 42);
});

test('a dumped filter decodes to what was asked for, and only a match-all redirect to the target is one', () => {
  // The kernel's dump has the request's shape (plus attributes podwire ignores).
  const f = decodeFilter(ingressRedirectFilterBody(7, 42));
  assert.deepEqual(f, {
    ifindex: 7,
    kind: 'u32',
    prio: 1,
    protocol: T.ETH_P_ALL,
    matchesAll: true,
    actions: [{ kind: 'mirred', action: T.TC_ACT_STOLEN, eaction: T.TCA_EGRESS_REDIR, ifindex: 42 }],
  });
  assert.equal(isRedirectAllTo(f, 42), true);
  assert.equal(isRedirectAllTo(f, 43), false, 'another target');
  assert.equal(isRedirectAllTo({ ...f, matchesAll: false }, 42), false, 'a key with a mask');
  assert.equal(isRedirectAllTo({ ...f, protocol: 0x0800 }, 42), false, 'IPv4 only');
  const first = f.actions?.[0];
  assert.ok(first);
  assert.equal(isRedirectAllTo({ ...f, actions: [{ ...first, eaction: 2 }] }, 42), false, 'a mirror');
  // u32's root hash table in a dump: kind u32, no selector, no action.
  const root = decodeFilter(
    new Uint8Array([
      ...encodeTcMsg({
        ifindex: 7,
        handle: 0x80000000,
        parent: 0xffff0000,
        info: (1 << 16) | (HOST_LITTLE_ENDIAN ? 0x0300 : 0x0003),
      }),
      ...encodeAttributes([{ type: T.TCA_KIND, value: new TextEncoder().encode('u32\0') }]),
    ]),
  );
  assert.equal(isRedirectAllTo(root, 42), false);
});

test('the dump request names the device and the ingress qdisc', () => {
  assert.deepEqual(decodeTcMsg(ingressFilterDumpBody(9)), {
    ifindex: 9,
    handle: 0,
    parent: 0xffff0000,
    info: 0,
  });
});
