/**
 * nfnetlink_log's codec (nfulnl-message.ts) on bytes laid out as linux/netfilter/nfnetlink_log.h says,
 * and the policy deny chains' packets read from them (denied-packet.ts). The kernel's side is tested for
 * real in test/kernel/netlink/nflog-socket.test.ts and test/datapath/linux-bridge-policy-deny-log.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { deniedPacket } from '../../../src/datapath/linux-bridge/denied-packet.js';
import { encodeAttributes, type RtAttr } from '../../../src/kernel/netlink/attributes.js';
import { decodeMessages, encodeMessage } from '../../../src/kernel/netlink/codec.js';
import { NetlinkProtocolError } from '../../../src/kernel/netlink/errors.js';
import {
  decodeNflogPacket,
  encodeNflogConfig,
  NFULNL_PACKET_TYPE,
  type NflogPacket,
} from '../../../src/kernel/netlink/nfulnl-message.js';
import { NFPROTO_IPV4, NFPROTO_IPV6 } from '../../../src/kernel/netlink/uapi/nfnetlink.js';
import * as L from '../../../src/kernel/netlink/uapi/nfnetlink-log.js';

const be16 = (n: number) => Uint8Array.of(n >> 8, n & 0xff);
const be32 = (n: number) => Uint8Array.of(n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
const cstr = (s: string) => Uint8Array.from([...Buffer.from(s), 0]);

/** A packet message as the kernel builds it (__build_packet_message): nfgenmsg, then attributes. */
function packetMessage(p: { family: number; group: number; attrs: RtAttr[] }): Uint8Array {
  const body = encodeAttributes(p.attrs);
  const payload = new Uint8Array(4 + body.length);
  payload[0] = p.family;
  payload.set(be16(p.group), 2);
  payload.set(body, 4);
  return encodeMessage({ type: NFULNL_PACKET_TYPE, flags: 0, seq: 0, pid: 0 }, payload);
}

const hdr = (proto: number, hook: number) => Uint8Array.of(proto >> 8, proto & 0xff, hook, 0);

/** An IPv4 header (IHL 5, or 6 with a 4-byte option) and the first 4 bytes of the transport header. */
function ipv4(
  src: number[],
  dst: number[],
  proto: number,
  sport: number,
  dport: number,
  opts = false,
  frag = 0,
) {
  const ihl = opts ? 24 : 20;
  const b = new Uint8Array(ihl + 8);
  b[0] = 0x40 | (ihl / 4);
  b.set(be16(frag), 6);
  b[8] = 64;
  b[9] = proto;
  b.set(src, 12);
  b.set(dst, 16);
  b.set(be16(sport), ihl);
  b.set(be16(dport), ihl + 2);
  return b;
}

describe('nfnetlink_log messages', () => {
  test('a packet message: family, group, header, prefix, devices and the payload', () => {
    const payload = ipv4([10, 90, 0, 2], [10, 90, 0, 4], 17, 40000, 7000);
    const bytes = packetMessage({
      family: NFPROTO_IPV4,
      group: 0x7077,
      attrs: [
        { type: L.NFULA_PACKET_HDR, value: hdr(0x0800, 2) },
        { type: L.NFULA_MARK, value: be32(0) },
        { type: L.NFULA_IFINDEX_INDEV, value: be32(5) },
        { type: L.NFULA_IFINDEX_OUTDEV, value: be32(6) },
        { type: L.NFULA_PREFIX, value: cstr('podwire-deny ingress') },
        { type: L.NFULA_PAYLOAD, value: payload },
      ],
    });
    const [m] = decodeMessages(bytes);
    assert.ok(m);
    const p = decodeNflogPacket(m);
    assert.deepEqual(
      { ...p, payload: [...p.payload] },
      {
        family: NFPROTO_IPV4,
        group: 0x7077,
        hwProtocol: 0x0800,
        hook: 2,
        prefix: 'podwire-deny ingress',
        indev: 5,
        outdev: 6,
        payload: [...payload],
      },
    );
    assert.deepEqual(deniedPacket(p), {
      direction: 'ingress',
      src: '10.90.0.2',
      dst: '10.90.0.4',
      protocol: 'UDP',
      port: 7000,
    });
  });

  test('refused: another message type, a short payload, no NFULA_PACKET_HDR, a short one', () => {
    const good = packetMessage({
      family: 2,
      group: 1,
      attrs: [{ type: L.NFULA_PACKET_HDR, value: hdr(0x800, 2) }],
    });
    const [m] = decodeMessages(good);
    assert.ok(m);
    assert.throws(
      () => decodeNflogPacket({ ...m, header: { ...m.header, type: 0x0a00 } }),
      NetlinkProtocolError,
    );
    assert.throws(() => decodeNflogPacket({ ...m, payload: m.payload.subarray(0, 3) }), NetlinkProtocolError);
    const [none] = decodeMessages(packetMessage({ family: 2, group: 1, attrs: [] }));
    assert.ok(none);
    assert.throws(() => decodeNflogPacket(none), /without NFULA_PACKET_HDR/);
    const [short] = decodeMessages(
      packetMessage({
        family: 2,
        group: 1,
        attrs: [{ type: L.NFULA_PACKET_HDR, value: Uint8Array.of(8, 0) }],
      }),
    );
    assert.ok(short);
    assert.throws(() => decodeNflogPacket(short), /NFULA_PACKET_HDR: 2 bytes/);
  });

  test('any prefix, group and payload round-trip through the bytes (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(NFPROTO_IPV4, NFPROTO_IPV6),
        fc.integer({ min: 0, max: 0xffff }),
        fc.string({ maxLength: 63 }).filter((s) => !s.includes('\0')),
        fc.uint8Array({ maxLength: 200 }),
        (family, group, prefix, payload) => {
          const [m] = decodeMessages(
            packetMessage({
              family,
              group,
              attrs: [
                { type: L.NFULA_PACKET_HDR, value: hdr(family === NFPROTO_IPV4 ? 0x800 : 0x86dd, 2) },
                { type: L.NFULA_PREFIX, value: cstr(prefix) },
                { type: L.NFULA_PAYLOAD, value: payload },
              ],
            }),
          );
          const p = decodeNflogPacket(m as NonNullable<typeof m>);
          assert.equal(p.family, family);
          assert.equal(p.group, group);
          assert.equal(p.prefix, prefix);
          assert.deepEqual([...p.payload], [...payload]);
        },
      ),
    );
  });

  test('the bind request: res_id is the group, then the command, the copy mode, threshold and timeout', () => {
    const b = encodeNflogConfig(L.NFULNL_CFG_CMD_BIND, 0x7077, {
      copyRange: 128,
      queueThreshold: 1,
      flushTimeout: 10,
    });
    assert.deepEqual(
      [...b],
      [
        ...[0, 0, 0x70, 0x77],
        ...[5, 0, L.NFULA_CFG_CMD, 0, L.NFULNL_CFG_CMD_BIND, 0, 0, 0],
        ...[10, 0, L.NFULA_CFG_MODE, 0, 0, 0, 0, 128, L.NFULNL_COPY_PACKET, 0, 0, 0],
        ...[8, 0, L.NFULA_CFG_QTHRESH, 0, 0, 0, 0, 1],
        ...[8, 0, L.NFULA_CFG_TIMEOUT, 0, 0, 0, 0, 10],
      ],
    );
    assert.throws(() => encodeNflogConfig(L.NFULNL_CFG_CMD_BIND, 0x10000), /not 0-65535/);
  });
});

describe('a denied packet read from the deny chains', () => {
  const packet = (family: number, prefix: string, payload: Uint8Array): NflogPacket => ({
    family,
    group: 0x7077,
    hwProtocol: family === NFPROTO_IPV4 ? 0x800 : 0x86dd,
    hook: 2,
    prefix,
    indev: 0,
    outdev: 0,
    payload,
  });

  test('IPv4 with options: TCP to its port', () => {
    const p = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1234, 443, true);
    assert.deepEqual(deniedPacket(packet(NFPROTO_IPV4, 'podwire-deny egress', p)), {
      direction: 'egress',
      src: '10.0.0.1',
      dst: '10.0.0.2',
      protocol: 'TCP',
      port: 443,
    });
  });

  test('IPv4 ICMP has no port; a later fragment has no port', () => {
    const icmp = deniedPacket(
      packet(NFPROTO_IPV4, 'podwire-deny egress', ipv4([1, 1, 1, 1], [2, 2, 2, 2], 1, 8, 0)),
    );
    assert.deepEqual(icmp, { direction: 'egress', src: '1.1.1.1', dst: '2.2.2.2', protocol: 'ICMP' });
    const frag = deniedPacket(
      packet(NFPROTO_IPV4, 'podwire-deny egress', ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, 1, 53, false, 100)),
    );
    assert.equal(frag?.port, undefined);
  });

  test('IPv6 through a hop-by-hop header to UDP; unknown protocol by number', () => {
    const b = new Uint8Array(40 + 8 + 8);
    b[0] = 0x60;
    b[6] = 0; // hop-by-hop
    b.set([0xfd, 0, 0, 0x90, ...new Array(11).fill(0), 2], 8);
    b.set([0xfd, 0, 0, 0x90, ...new Array(11).fill(0), 4], 24);
    b[40] = 17; // next: UDP
    b[41] = 0; // 8 bytes
    b.set([0x9c, 0x40, 0x1b, 0x58], 48);
    assert.deepEqual(deniedPacket(packet(NFPROTO_IPV6, 'podwire-deny ingress', b)), {
      direction: 'ingress',
      src: 'fd00:90::2',
      dst: 'fd00:90::4',
      protocol: 'UDP',
      port: 7000,
    });
    b[6] = 253;
    assert.equal(deniedPacket(packet(NFPROTO_IPV6, 'podwire-deny ingress', b))?.protocol, '253');
  });

  test('not ours: another prefix, a truncated header, another family', () => {
    const p = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1234, 443);
    assert.equal(deniedPacket(packet(NFPROTO_IPV4, 'something else', p)), undefined);
    assert.equal(deniedPacket(packet(NFPROTO_IPV4, 'podwire-deny egress', p.subarray(0, 19))), undefined);
    assert.equal(deniedPacket(packet(7, 'podwire-deny egress', p)), undefined);
  });
});
