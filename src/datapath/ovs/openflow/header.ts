/**
 * The OpenFlow message header (OpenFlow 1.3.5, 7.1 "OpenFlow Header"; the same eight bytes in every
 * version): version, type, length of the whole message, transaction id. Message type numbers differ
 * between versions: `OFPT13` is OpenFlow 1.3's (ofp_type), `OFPT10` OpenFlow 1.0's, used only for
 * the port's no-flood bit (see port-mod-of10.ts).
 */

/** ofp_header.version: OpenFlow 1.0 (0x01) and 1.3 (0x04). */
export const OFP10_VERSION = 0x01;
export const OFP13_VERSION = 0x04;

export const OFP_HEADER_LEN = 8;
/** The largest message: `length` is 16 bits. */
export const OFP_MAX_MESSAGE_LEN = 0xffff;

/** enum ofp_type, OpenFlow 1.3. */
export const OFPT13 = {
  HELLO: 0,
  ERROR: 1,
  ECHO_REQUEST: 2,
  ECHO_REPLY: 3,
  EXPERIMENTER: 4,
  FEATURES_REQUEST: 5,
  FEATURES_REPLY: 6,
  GET_CONFIG_REQUEST: 7,
  GET_CONFIG_REPLY: 8,
  SET_CONFIG: 9,
  PACKET_IN: 10,
  FLOW_REMOVED: 11,
  PORT_STATUS: 12,
  PACKET_OUT: 13,
  FLOW_MOD: 14,
  GROUP_MOD: 15,
  PORT_MOD: 16,
  TABLE_MOD: 17,
  MULTIPART_REQUEST: 18,
  MULTIPART_REPLY: 19,
  BARRIER_REQUEST: 20,
  BARRIER_REPLY: 21,
} as const;

/** enum ofp_type, OpenFlow 1.0. */
export const OFPT10 = {
  HELLO: 0,
  ERROR: 1,
  ECHO_REQUEST: 2,
  ECHO_REPLY: 3,
  VENDOR: 4,
  FEATURES_REQUEST: 5,
  FEATURES_REPLY: 6,
  GET_CONFIG_REQUEST: 7,
  GET_CONFIG_REPLY: 8,
  SET_CONFIG: 9,
  PACKET_IN: 10,
  FLOW_REMOVED: 11,
  PORT_STATUS: 12,
  PACKET_OUT: 13,
  FLOW_MOD: 14,
  PORT_MOD: 15,
  STATS_REQUEST: 16,
  STATS_REPLY: 17,
  BARRIER_REQUEST: 18,
  BARRIER_REPLY: 19,
  QUEUE_GET_CONFIG_REQUEST: 20,
  QUEUE_GET_CONFIG_REPLY: 21,
} as const;

export interface OfpHeader {
  version: number;
  type: number;
  /** Length of the whole message, header included. */
  length: number;
  xid: number;
}

/** The whole message: header then `body`. */
export function encodeMessage(
  version: number,
  type: number,
  xid: number,
  body: Uint8Array = new Uint8Array(),
): Buffer {
  const length = OFP_HEADER_LEN + body.length;
  if (length > OFP_MAX_MESSAGE_LEN) throw new RangeError(`OpenFlow message of ${length} bytes is over 65535`);
  const out = Buffer.alloc(length);
  out.writeUInt8(version, 0);
  out.writeUInt8(type, 1);
  out.writeUInt16BE(length, 2);
  out.writeUInt32BE(xid >>> 0, 4);
  out.set(body, OFP_HEADER_LEN);
  return out;
}

/** The header at the start of `buf` (which must hold at least 8 bytes). */
export function decodeHeader(buf: Uint8Array): OfpHeader {
  if (buf.length < OFP_HEADER_LEN) throw new RangeError(`OpenFlow header needs 8 bytes, got ${buf.length}`);
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  return {
    version: view.readUInt8(0),
    type: view.readUInt8(1),
    length: view.readUInt16BE(2),
    xid: view.readUInt32BE(4),
  };
}
