import assert from 'node:assert/strict';
import { SocketAddress } from 'node:net';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  decodeNeighborAdvertisement,
  encodeNeighborAdvertisement,
  icmpv6Checksum,
  NA_FRAME_LEN,
  type NeighborAdvertisement,
  unsolicitedNeighborAdvertisement,
} from '../../src/arp/ndp-frame.js';
import { PodwireError } from '../../src/base/errors.js';

const macBytes = fc.uint8Array({ minLength: 6, maxLength: 6 }).map((b) => Buffer.from(b));
const macText = macBytes.map((b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(':'));

/** Sixteen octets as eight groups, biased towards zeros so that '::' forms show up. */
const ipv6Bytes = fc
  .array(fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, fc.integer({ min: 0, max: 0xffff })), {
    minLength: 8,
    maxLength: 8,
  })
  .map((words) => {
    const out = Buffer.alloc(16);
    words.forEach((w, i) => {
      out.writeUInt16BE(w, 2 * i);
    });
    return out;
  });
const unicastBytes = ipv6Bytes.filter((b) => b[0] !== 0xff);

/** Canonical text via libuv's inet_ntop, not the code under test. */
function text(bytes: Buffer): string {
  const words = Array.from({ length: 8 }, (_, i) => bytes.readUInt16BE(2 * i).toString(16));
  return new SocketAddress({ address: words.join(':'), family: 'ipv6' }).address;
}

/**
 * RFC 1071 checksum summed in 32-bit words with BigInt and folded at the end: a different route to
 * the same number than the 16-bit loop under test.
 */
function referenceChecksum(src: Buffer, dst: Buffer, message: Buffer): number {
  const pseudo = Buffer.alloc(40);
  src.copy(pseudo, 0);
  dst.copy(pseudo, 16);
  pseudo.writeUInt32BE(message.length, 32);
  pseudo[39] = 58;
  const data = Buffer.concat([pseudo, message, Buffer.alloc((4 - (message.length % 4)) % 4)]);
  let sum = 0n;
  for (let i = 0; i < data.length; i += 4) sum += BigInt(data.readUInt32BE(i));
  while (sum >> 16n) sum = (sum & 0xffffn) + (sum >> 16n);
  return Number(~sum & 0xffffn);
}

interface RawNa {
  dst: Buffer;
  src: Buffer;
  ipSrc: Buffer;
  ipDst: Buffer;
  flags: number;
  target: Buffer;
  options: Buffer;
}

/** Assembles an NA frame byte by byte, checksum from `referenceChecksum`. */
function rawNa(na: RawNa): Buffer {
  const icmp = Buffer.concat([Buffer.from([136, 0, 0, 0, na.flags, 0, 0, 0]), na.target, na.options]);
  icmp.writeUInt16BE(referenceChecksum(na.ipSrc, na.ipDst, icmp), 2);
  const ip = Buffer.alloc(40);
  ip.writeUInt32BE(0x6000_0000, 0);
  ip.writeUInt16BE(icmp.length, 4);
  ip[6] = 58;
  ip[7] = 255;
  na.ipSrc.copy(ip, 8);
  na.ipDst.copy(ip, 24);
  return Buffer.concat([na.dst, na.src, Buffer.from([0x86, 0xdd]), ip, icmp]);
}

/** Recomputes the checksum of a (possibly mutated) frame so that another check is the one that fires. */
function fixChecksum(frame: Buffer): Buffer {
  const len = Math.min(frame.readUInt16BE(18), frame.length - 54);
  const icmp = frame.subarray(54, 54 + len);
  icmp.writeUInt16BE(0, 2);
  icmp.writeUInt16BE(referenceChecksum(frame.subarray(22, 38), frame.subarray(38, 54), icmp), 2);
  return frame;
}

const rawNaArb = fc
  .record({
    dst: macBytes,
    src: macBytes,
    ipSrc: ipv6Bytes,
    ipDst: ipv6Bytes,
    router: fc.boolean(),
    solicited: fc.boolean(),
    override: fc.boolean(),
    target: unicastBytes,
    tlla: fc.option(macBytes, { nil: undefined }),
  })
  .map((r) => {
    const solicited = r.solicited && r.ipDst[0] !== 0xff;
    const flags = (r.router ? 0x80 : 0) | (solicited ? 0x40 : 0) | (r.override ? 0x20 : 0);
    const options = r.tlla === undefined ? Buffer.alloc(0) : Buffer.concat([Buffer.from([2, 1]), r.tlla]);
    return rawNa({ ...r, flags, options });
  });

const naArb: fc.Arbitrary<NeighborAdvertisement> = fc
  .record({
    dst: macText,
    src: macText,
    ipSrc: ipv6Bytes.map(text),
    ipDst: ipv6Bytes.map(text),
    router: fc.boolean(),
    solicited: fc.boolean(),
    override: fc.boolean(),
    target: unicastBytes.map(text),
    targetLinkAddress: fc.option(macText, { nil: undefined }),
  })
  .map((na) => ({ ...na, solicited: na.solicited && !na.ipDst.startsWith('ff') }));

/**
 * Captured with tcpdump from Linux 6.1 itself: `ndisc_notify=1` on a veth, fd00:10:244::5/64 added,
 * then the MAC set to 02:42:ac:11:00:03.
 */
const KERNEL_NA =
  '333300000001 0242ac110003 86dd' + // Ethernet: all-nodes multicast, from the interface, IPv6
  '60000000 0020 3a ff' + // version 6, payload 32, next header ICMPv6, hop limit 255
  'fd000010024400000000000000000005 ff020000000000000000000000000001' + // src the address, dst ff02::1
  '88 00 a995 20000000' + // type 136, code 0, checksum, Override
  'fd000010024400000000000000000005' + // target
  '02 01 0242ac110003'; // Target Link-Layer Address

function hex(s: string): Buffer {
  return Buffer.from(s.replaceAll(' ', ''), 'hex');
}

function isDecodeError(message: RegExp) {
  return (err: unknown) =>
    err instanceof PodwireError && err.code === 'ERR_DECODE' && message.test(err.message);
}

describe('ICMPv6 checksum', () => {
  test('matches an independent RFC 1071 computation', () => {
    fc.assert(
      fc.property(ipv6Bytes, ipv6Bytes, fc.uint8Array({ maxLength: 200 }), (src, dst, message) => {
        assert.equal(icmpv6Checksum(src, dst, message), referenceChecksum(src, dst, Buffer.from(message)));
      }),
      { numRuns: 200 },
    );
  });

  test('the checksum field of every encoded advertisement is the reference checksum', () => {
    fc.assert(
      fc.property(naArb, (na) => {
        const frame = encodeNeighborAdvertisement(na);
        const icmp = Buffer.from(frame.subarray(54));
        const stored = icmp.readUInt16BE(2);
        icmp.writeUInt16BE(0, 2);
        assert.equal(stored, referenceChecksum(frame.subarray(22, 38), frame.subarray(38, 54), icmp));
      }),
      { numRuns: 200 },
    );
  });
});

describe('Neighbor Advertisement codec', () => {
  test('unsolicitedNeighborAdvertisement is byte for byte what the kernel sends', () => {
    const frame = unsolicitedNeighborAdvertisement('02:42:ac:11:00:03', 'fd00:10:244::5');
    assert.equal(frame.length, NA_FRAME_LEN);
    assert.equal(frame.toString('hex'), hex(KERNEL_NA).toString('hex'));
    assert.deepEqual(decodeNeighborAdvertisement(frame), {
      dst: '33:33:00:00:00:01',
      src: '02:42:ac:11:00:03',
      ipSrc: 'fd00:10:244::5',
      ipDst: 'ff02::1',
      router: false,
      solicited: false,
      override: true,
      target: 'fd00:10:244::5',
      targetLinkAddress: '02:42:ac:11:00:03',
    });
  });

  test('encode then decode gives the advertisement back', () => {
    fc.assert(
      fc.property(naArb, (na) => {
        assert.deepEqual(decodeNeighborAdvertisement(encodeNeighborAdvertisement(na)), na);
      }),
      { numRuns: 200 },
    );
  });

  test('decode then encode gives the same bytes', () => {
    fc.assert(
      fc.property(rawNaArb, (raw) => {
        assert.deepEqual(encodeNeighborAdvertisement(decodeNeighborAdvertisement(raw)), raw);
      }),
      { numRuns: 200 },
    );
  });

  test('any flipped bit in the addresses or the ICMPv6 message is caught', () => {
    const frame = hex(KERNEL_NA);
    fc.assert(
      fc.property(fc.integer({ min: 22 * 8, max: frame.length * 8 - 1 }), (bit) => {
        const bad = Buffer.from(frame);
        bad[bit >> 3] = (bad[bit >> 3] ?? 0) ^ (1 << (bit & 7));
        assert.throws(() => decodeNeighborAdvertisement(bad), isDecodeError(/./));
      }),
      { numRuns: 200 },
    );
  });

  test('decode rejects every truncation', () => {
    const frame = hex(KERNEL_NA);
    for (let len = 0; len < frame.length; len++) {
      assert.throws(() => decodeNeighborAdvertisement(frame.subarray(0, len)), isDecodeError(/./));
    }
  });

  const mutations: [string, (f: Buffer) => Buffer, RegExp][] = [
    ['ethertype IPv4', (f) => f.fill(0x08, 12, 13).fill(0, 13, 14), /ethertype 0x0800/],
    ['IP version 4', (f) => f.fill(0x40, 14, 15), /IP version 4/],
    ['a hop-by-hop extension header', (f) => f.fill(0, 20, 21), /next header 0/],
    ['hop limit 64 (routed)', (f) => f.fill(64, 21, 22), /hop limit 64/],
    ['payload length beyond the frame', (f) => fixChecksum(f.fill(0x28, 19, 20)), /exceeds/],
    ['ICMPv6 shorter than an NA', (f) => fixChecksum(f.fill(16, 19, 20)), /ICMPv6 length 16/],
    ['a Neighbor Solicitation', (f) => fixChecksum(f.fill(135, 54, 55)), /type 135/],
    ['code 1', (f) => fixChecksum(f.fill(1, 55, 56)), /code 1/],
    ['a wrong checksum', (f) => f.fill(0xaa, 56, 57), /bad ICMPv6 checksum 0xaa95/],
    ['a multicast target', (f) => fixChecksum(f.fill(0xff, 62, 63)), /target ff00:10:244::5 is multicast/],
    ['Solicited towards ff02::1', (f) => fixChecksum(f.fill(0x60, 58, 59)), /Solicited/],
    ['an option of length 0', (f) => fixChecksum(f.fill(0, 79, 80)), /option type 2 has length 0/],
    ['an option overrunning the message', (f) => fixChecksum(f.fill(2, 79, 80)), /overruns/],
    [
      'a dangling option octet',
      (f) => fixChecksum(Buffer.concat([f, Buffer.from([1])]).fill(33, 19, 20)),
      /truncated/,
    ],
    [
      'a 16-octet TLLA option',
      (f) =>
        fixChecksum(
          Buffer.concat([f, Buffer.alloc(8)])
            .fill(40, 19, 20)
            .fill(2, 79, 80),
        ),
      /of 16 octets, want 8/,
    ],
  ];
  for (const [what, mutate, message] of mutations) {
    test(`decode rejects ${what}`, () => {
      assert.throws(() => decodeNeighborAdvertisement(mutate(hex(KERNEL_NA))), isDecodeError(message));
    });
  }

  test('decode skips unknown options, ignores reserved bits and trailing bytes', () => {
    const nonce = Buffer.from([14, 1, 1, 2, 3, 4, 5, 6]);
    const raw = rawNa({
      dst: hex('333300000001'),
      src: hex('0242ac110003'),
      ipSrc: hex('fd000010024400000000000000000005'),
      ipDst: hex('ff020000000000000000000000000001'),
      flags: 0x3f,
      target: hex('fd000010024400000000000000000005'),
      options: Buffer.concat([nonce, hex('02010242ac110003')]),
    });
    raw[59] = 0xff; // reserved
    fixChecksum(raw);
    const na = decodeNeighborAdvertisement(Buffer.concat([raw, Buffer.alloc(4)]));
    assert.equal(na.override, true);
    assert.equal(na.solicited, false);
    assert.equal(na.router, false);
    assert.equal(na.targetLinkAddress, '02:42:ac:11:00:03');
  });

  test('an advertisement without options decodes with no link-layer address', () => {
    const na = decodeNeighborAdvertisement(fixChecksum(hex(KERNEL_NA).subarray(0, 78).fill(24, 19, 20)));
    assert.equal(na.targetLinkAddress, undefined);
  });

  test('encode rejects a multicast target and a solicited multicast advertisement', () => {
    assert.throws(
      () => unsolicitedNeighborAdvertisement('02:42:ac:11:00:03', 'ff02::1'),
      (err: unknown) => err instanceof PodwireError && err.code === 'ERR_INVALID_CONFIG',
    );
    assert.throws(
      () => unsolicitedNeighborAdvertisement('02:42:ac:11:00:03', '10.0.0.1'),
      (err: unknown) => err instanceof PodwireError && err.code === 'ERR_INVALID_CONFIG',
    );
    const na = decodeNeighborAdvertisement(hex(KERNEL_NA));
    assert.throws(
      () => encodeNeighborAdvertisement({ ...na, solicited: true }),
      (err: unknown) => err instanceof PodwireError && err.code === 'ERR_INTERNAL',
    );
  });
});
