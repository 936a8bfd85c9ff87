import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { decodeEthernetFrame, ETH_HLEN, encodeEthernetFrame } from '../../src/arp/ethernet.js';
import { PodwireError } from '../../src/base/errors.js';
import { formatMac, normalizeMac, parseMac } from '../../src/base/mac.js';

const macBytes = fc.uint8Array({ minLength: 6, maxLength: 6 });
/** Canonical MAC text built without the code under test. */
const macText = macBytes.map((b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(':'));

function hasCode(code: string) {
  return (err: unknown) => err instanceof PodwireError && err.code === code;
}

describe('MAC text', () => {
  test('parse and format are inverse', () => {
    fc.assert(
      fc.property(macBytes, (bytes) => {
        const text = formatMac(bytes);
        assert.match(text, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
        assert.deepEqual(parseMac(text), Buffer.from(bytes));
      }),
      { numRuns: 200 },
    );
  });

  test('accepts upper case and normalizes to lower case', () => {
    assert.equal(normalizeMac('02:42:AC:11:00:0F'), '02:42:ac:11:00:0f');
    assert.equal(formatMac(Buffer.from('00112233445566778899', 'hex'), 2), '22:33:44:55:66:77');
  });

  for (const bad of [
    '',
    '02:42:ac:11:00',
    '02:42:ac:11:00:02:03',
    '02-42-ac-11-00-02',
    '0242.ac11.0002',
    '2:42:ac:11:0:2',
    '02:42:ac:11:00:0g',
    ' 02:42:ac:11:00:02',
    '02:42:ac:11:00:02\n',
  ]) {
    test(`rejects ${JSON.stringify(bad)} with ERR_INVALID_CONFIG naming it`, () => {
      assert.throws(
        () => parseMac(bad),
        (err: unknown) => hasCode('ERR_INVALID_CONFIG')(err) && (err as Error).message.includes(`"${bad}"`),
      );
    });
  }

  test('formatMac refuses to read past the end', () => {
    assert.throws(() => formatMac(Buffer.alloc(6), 1), hasCode('ERR_INTERNAL'));
  });
});

describe('Ethernet II header', () => {
  const header = fc.record(
    { dst: macText, src: macText, ethertype: fc.integer({ min: 0x0600, max: 0xffff }) },
    { noNullPrototype: true },
  );

  test('encode then decode gives the header and payload back', () => {
    fc.assert(
      fc.property(header, fc.uint8Array({ maxLength: 64 }), (h, payload) => {
        const frame = encodeEthernetFrame(h, payload);
        assert.equal(frame.length, ETH_HLEN + payload.length);
        const decoded = decodeEthernetFrame(frame);
        assert.deepEqual(decoded.header, h);
        assert.deepEqual(new Uint8Array(decoded.payload), payload);
      }),
      { numRuns: 200 },
    );
  });

  test('decode then encode gives the same bytes', () => {
    const rawFrame = fc
      .tuple(macBytes, macBytes, fc.integer({ min: 0x0600, max: 0xffff }), fc.uint8Array({ maxLength: 64 }))
      .map(([dst, src, type, payload]) => {
        const t = Buffer.alloc(2);
        t.writeUInt16BE(type);
        return Buffer.concat([dst, src, t, payload]);
      });
    fc.assert(
      fc.property(rawFrame, (raw) => {
        const { header: h, payload } = decodeEthernetFrame(raw);
        assert.deepEqual(encodeEthernetFrame(h, payload), raw);
      }),
      { numRuns: 200 },
    );
  });

  test('decode rejects runts and 802.3 length frames', () => {
    for (let len = 0; len < ETH_HLEN; len++) {
      assert.throws(() => decodeEthernetFrame(Buffer.alloc(len, 0xff)), hasCode('ERR_DECODE'));
    }
    const llc = Buffer.alloc(60);
    llc.writeUInt16BE(46, 12);
    assert.throws(() => decodeEthernetFrame(llc), { message: /802\.3 length/ });
  });

  test('encode refuses a length field as ethertype', () => {
    const h = { dst: 'ff:ff:ff:ff:ff:ff', src: '02:00:00:00:00:01', ethertype: 0x05ff };
    assert.throws(() => encodeEthernetFrame(h, Buffer.alloc(0)), hasCode('ERR_INTERNAL'));
  });
});
