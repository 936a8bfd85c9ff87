/**
 * OFPT_MULTIPART_REQUEST / OFPT_MULTIPART_REPLY (OpenFlow 1.3.5, 7.3.5 "Multipart Messages"): an
 * 8-byte header (type, flags, pad[4]) before the body; a reply may come in several messages with
 * the same xid, all but the last flagged OFPMPF_REPLY_MORE. OpenFlow 1.0's STATS_REQUEST/REPLY is
 * the same idea with a 4-byte header (type, flags) and the same flag bit (OFPSF_REPLY_MORE).
 */
import { DecodeError } from '../../../base/errors.js';
import { OFP10_VERSION } from './header.js';

/** enum ofp_multipart_type, OpenFlow 1.3. */
export const OFPMP = {
  DESC: 0,
  FLOW: 1,
  AGGREGATE: 2,
  TABLE: 3,
  PORT_STATS: 4,
  QUEUE: 5,
  GROUP: 6,
  GROUP_DESC: 7,
  GROUP_FEATURES: 8,
  METER: 9,
  METER_CONFIG: 10,
  METER_FEATURES: 11,
  TABLE_FEATURES: 12,
  PORT_DESC: 13,
  EXPERIMENTER: 0xffff,
} as const;

/** ofp_multipart_request.flags: more requests follow (podwire never sends one in parts). */
export const OFPMPF_REQ_MORE = 1 << 0;
/** ofp_multipart_reply.flags: more replies follow. */
export const OFPMPF_REPLY_MORE = 1 << 0;

/** The multipart header's length: 8 in 1.3 (type, flags, pad[4]), 4 in 1.0 (type, flags). */
export function multipartHeaderLen(version: number): number {
  return version === OFP10_VERSION ? 4 : 8;
}

/** A MULTIPART_REQUEST (1.0: STATS_REQUEST) body: the multipart header, then `body`. */
export function encodeMultipartRequest(
  version: number,
  mpType: number,
  body: Uint8Array = new Uint8Array(),
  flags = 0,
): Buffer {
  const hlen = multipartHeaderLen(version);
  const out = Buffer.alloc(hlen + body.length);
  out.writeUInt16BE(mpType, 0);
  out.writeUInt16BE(flags, 2);
  out.set(body, hlen);
  return out;
}

export interface MultipartReply {
  mpType: number;
  flags: number;
  /** What follows the multipart header. */
  body: Buffer;
}

/** Decodes a MULTIPART_REPLY (1.0: STATS_REPLY) body (after the 8-byte OpenFlow header). */
export function decodeMultipartReply(version: number, msgBody: Buffer): MultipartReply {
  const hlen = multipartHeaderLen(version);
  if (msgBody.length < hlen)
    throw new DecodeError(`multipart reply of ${msgBody.length} bytes, need ${hlen}`);
  return { mpType: msgBody.readUInt16BE(0), flags: msgBody.readUInt16BE(2), body: msgBody.subarray(hlen) };
}

/** struct ofp_desc (OFPMP_DESC's reply): five NUL-padded strings. */
export interface SwitchDesc {
  mfrDesc: string;
  hwDesc: string;
  swDesc: string;
  serialNum: string;
  dpDesc: string;
}

/** Decodes OFPMP_DESC's reply body (1056 bytes). Equivalent to: `ovs-ofctl -O OpenFlow13 dump-desc`. */
export function decodeDesc(body: Buffer): SwitchDesc {
  if (body.length < 1056) throw new DecodeError(`OFPMP_DESC reply of ${body.length} bytes, need 1056`);
  const str = (off: number, len: number) => {
    const b = body.subarray(off, off + len);
    const end = b.indexOf(0);
    return b.subarray(0, end < 0 ? len : end).toString('latin1');
  };
  return {
    mfrDesc: str(0, 256),
    hwDesc: str(256, 256),
    swDesc: str(512, 256),
    serialNum: str(768, 32),
    dpDesc: str(800, 256),
  };
}

/** OpenFlow 1.3's struct ofp_port (64 bytes), as OFPMP_PORT_DESC lists it. */
export interface Port13 {
  portNo: number;
  hwAddr: string;
  name: string;
  config: number;
  state: number;
}

export const OFP13_PORT_LEN = 64;

/** Decodes OFPMP_PORT_DESC's reply body: a sequence of ofp_port. Equivalent to: `ovs-ofctl -O OpenFlow13 dump-ports-desc`. */
export function decodePortDesc(body: Buffer): Port13[] {
  if (body.length % OFP13_PORT_LEN !== 0) {
    throw new DecodeError(`OFPMP_PORT_DESC reply of ${body.length} bytes is not a multiple of 64`);
  }
  const ports: Port13[] = [];
  for (let off = 0; off < body.length; off += OFP13_PORT_LEN) {
    const name = body.subarray(off + 16, off + 32);
    const end = name.indexOf(0);
    ports.push({
      portNo: body.readUInt32BE(off),
      hwAddr: [...body.subarray(off + 8, off + 14)].map((b) => b.toString(16).padStart(2, '0')).join(':'),
      name: name.subarray(0, end < 0 ? 16 : end).toString('latin1'),
      config: body.readUInt32BE(off + 32),
      state: body.readUInt32BE(off + 36),
    });
  }
  return ports;
}
