import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  ARP_FRAME_LEN,
  type ArpFrame,
  decodeArpFrame,
  decodeArpPacket,
  encodeArpFrame,
  encodeArpPacket,
  gratuitousArp,
} from '../../src/arp/arp-frame.js';
import { PodwireError } from '../../src/base/errors.js';

const macBytes = fc.uint8Array({ minLength: 6, maxLength: 6 });
const macText = macBytes.map((b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(':'));
const ipv4Bytes = fc.uint8Array({ minLength: 4, maxLength: 4 });
const op = fc.constantFrom(1 as const, 2 as const);

const arpFrame: fc.Arbitrary<ArpFrame> = fc.record(
  {
    dst: macText,
    src: macText,
    arp: fc.record(
      { op, sha: macText, spa: fc.ipV4(), tha: macText, tpa: fc.ipV4() },
      { noNullPrototype: true },
    ),
  },
  { noNullPrototype: true },
);

/** A well-formed Ethernet/IPv4 ARP frame assembled byte by byte, without the code under test. */
const rawArpFrame = fc
  .tuple(macBytes, macBytes, op, macBytes, ipv4Bytes, macBytes, ipv4Bytes)
  .map(([dst, src, o, sha, spa, tha, tpa]) =>
    Buffer.concat([
      dst,
      src,
      Buffer.from([0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0, o]),
      sha,
      spa,
      tha,
      tpa,
    ]),
  );

/**
 * Captured with tcpdump from Linux 6.1 itself: `arp_notify=1` on a veth with 02:42:ac:11:00:02 and
 * 10.244.1.5/24, brought up.
 */
const KERNEL_GARP =
  'ffffffffffff 0242ac110002 0806' + // Ethernet: broadcast, from the interface, ARP
  '0001 0800 06 04 0001' + // Ethernet, IPv4, hlen 6, plen 4, request
  '0242ac110002 0af40105' + // sha, spa = 10.244.1.5
  '000000000000 0af40105'; // tha zero, tpa = spa

function hex(s: string): Buffer {
  return Buffer.from(s.replaceAll(' ', ''), 'hex');
}

function isDecodeError(message: RegExp) {
  return (err: unknown) =>
    err instanceof PodwireError && err.code === 'ERR_DECODE' && message.test(err.message);
}

describe('ARP frame codec', () => {
  test('encode then decode gives the frame back', () => {
    fc.assert(
      fc.property(arpFrame, (f) => {
        const bytes = encodeArpFrame(f);
        assert.equal(bytes.length, ARP_FRAME_LEN);
        assert.deepEqual(decodeArpFrame(bytes), f);
        assert.deepEqual(decodeArpPacket(encodeArpPacket(f.arp)), f.arp);
      }),
      { numRuns: 200 },
    );
  });

  test('decode then encode gives the same bytes', () => {
    fc.assert(
      fc.property(rawArpFrame, (raw) => {
        assert.deepEqual(encodeArpFrame(decodeArpFrame(raw)), raw);
      }),
      { numRuns: 200 },
    );
  });

  test('gratuitousArp is byte for byte what the kernel sends', () => {
    const frame = gratuitousArp('02:42:ac:11:00:02', '10.244.1.5');
    assert.equal(frame.toString('hex'), hex(KERNEL_GARP).toString('hex'));
    assert.deepEqual(decodeArpFrame(frame), {
      dst: 'ff:ff:ff:ff:ff:ff',
      src: '02:42:ac:11:00:02',
      arp: {
        op: 1,
        sha: '02:42:ac:11:00:02',
        spa: '10.244.1.5',
        tha: '00:00:00:00:00:00',
        tpa: '10.244.1.5',
      },
    });
  });

  test('gratuitousArp accepts upper-case MAC text', () => {
    assert.deepEqual(gratuitousArp('02:42:AC:11:00:02', '10.244.1.5'), hex(KERNEL_GARP));
  });

  test('decode accepts frames padded to the Ethernet minimum (and arping -U padding)', () => {
    for (const total of [60, 58]) {
      const padded = Buffer.concat([hex(KERNEL_GARP), Buffer.alloc(total - ARP_FRAME_LEN)]);
      assert.equal(decodeArpFrame(padded).arp.tpa, '10.244.1.5');
    }
  });

  test('decode rejects every truncation', () => {
    const full = hex(KERNEL_GARP);
    for (let len = 0; len < full.length; len++) {
      assert.throws(() => decodeArpFrame(full.subarray(0, len)), isDecodeError(/too short/));
    }
  });

  const corruptions: [string, number, number[], RegExp][] = [
    ['ethertype IPv4', 12, [0x08, 0x00], /not an ARP frame: ethertype 0x0800/],
    ['hardware type IEEE 802', 14, [0x00, 0x06], /hardware type 6/],
    ['protocol type IPv6', 16, [0x86, 0xdd], /protocol type 0x86dd/],
    ['hlen 8', 18, [8], /hlen=8/],
    ['plen 16', 19, [16], /plen=16/],
    ['op 0', 20, [0, 0], /op 0/],
    ['op 3 (RARP)', 20, [0, 3], /op 3/],
  ];
  for (const [what, at, bytes, message] of corruptions) {
    test(`decode rejects ${what}`, () => {
      const frame = hex(KERNEL_GARP);
      frame.set(bytes, at);
      assert.throws(() => decodeArpFrame(frame), isDecodeError(message));
    });
  }

  test('encode rejects bad addresses with ERR_INVALID_CONFIG and bad ops with ERR_INTERNAL', () => {
    const config = (err: unknown) => err instanceof PodwireError && err.code === 'ERR_INVALID_CONFIG';
    assert.throws(() => gratuitousArp('02:42:ac:11:00', '10.0.0.1'), config);
    assert.throws(() => gratuitousArp('02:42:ac:11:00:02', '10.0.0.256'), config);
    assert.throws(() => gratuitousArp('02:42:ac:11:00:02', 'fd00::1'), config);
    const bad = {
      op: 3,
      sha: '02:00:00:00:00:01',
      spa: '10.0.0.1',
      tha: '00:00:00:00:00:00',
      tpa: '10.0.0.2',
    };
    assert.throws(
      () => encodeArpPacket(bad as never),
      (err: unknown) => err instanceof PodwireError && err.code === 'ERR_INTERNAL',
    );
  });
});
