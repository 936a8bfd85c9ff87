/**
 * OFPT_HELLO and version negotiation (OpenFlow 1.3.5, 7.5.1 "Hello" and 6.3.1 "Connection Setup").
 * podwire speaks exactly one version per connection, so its HELLO carries one
 * OFPHET_VERSIONBITMAP element with that version's bit; OpenFlow 1.0 has no hello elements, so a
 * 1.0 HELLO is the bare header.
 */
import { OFP_HEADER_LEN, OFP10_VERSION } from './header.js';

/** enum ofp_hello_elem_type. */
export const OFPHET_VERSIONBITMAP = 1;

/** The HELLO body podwire sends for `version` (empty for OpenFlow 1.0). */
export function encodeHelloBody(version: number): Buffer {
  if (version === OFP10_VERSION) return Buffer.alloc(0);
  // ofp_hello_elem_versionbitmap: type, length (4 + 4 * bitmaps, before padding), bitmaps; padded to 8.
  const body = Buffer.alloc(8);
  body.writeUInt16BE(OFPHET_VERSIONBITMAP, 0);
  body.writeUInt16BE(8, 2);
  body.writeUInt32BE((1 << version) >>> 0, 4);
  return body;
}

/**
 * Whether the peer's HELLO (`msg`, header included) allows `version` (6.3.1): with a version
 * bitmap, its bit must be set; without one, the negotiated version is the smaller of the two
 * headers' versions, which must then be `version` itself.
 */
export function helloAllows(msg: Buffer, version: number): boolean {
  const peerVersion = msg.readUInt8(0);
  let off = OFP_HEADER_LEN;
  while (off + 4 <= msg.length) {
    const type = msg.readUInt16BE(off);
    const len = msg.readUInt16BE(off + 2);
    if (len < 4 || off + len > msg.length) break;
    if (type === OFPHET_VERSIONBITMAP) {
      const word = Math.floor(version / 32);
      if (4 + 4 * word + 4 > len) return false;
      return ((msg.readUInt32BE(off + 4 + 4 * word) >>> (version % 32)) & 1) === 1;
    }
    off += (len + 7) & ~7;
  }
  return peerVersion >= version;
}
