/**
 * NLMSG_ERROR (struct nlmsgerr) and NLMSG_DONE payloads, with the extended ack (netlink(7),
 * NETLINK_EXT_ACK): an error or ack carries the negated errno, the request's header, the request's
 * payload unless NLM_F_CAPPED is set, then NLMSGERR_ATTR_* attributes when NLM_F_ACK_TLVS is set.
 */
import {
  type AttrSchema,
  attrList,
  bytes,
  copyBytes,
  cstring,
  decodeAttributes,
  decodeWithSchema,
  encodeAttributes,
  encodeWithSchema,
  type RtAttr,
  u32,
} from './attributes.js';
import { concatBytes, dataView, HOST_LITTLE_ENDIAN, type NetlinkMessage, type NlMsgHdr } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import * as N from './uapi/netlink.js';

/** The kernel's explanation of an error (or a warning on success). */
export interface ExtAck {
  /** NLMSGERR_ATTR_MSG: human-readable text. */
  msg?: string;
  /** NLMSGERR_ATTR_OFFS: offset of the offending attribute within the request. */
  offset?: number;
  cookie?: Uint8Array;
  policy?: RtAttr[];
  /** NLMSGERR_ATTR_MISS_TYPE: the attribute that was required but missing. */
  missType?: number;
  missNest?: number;
}

const EXTACK_SCHEMA: AttrSchema<ExtAck> = {
  msg: { type: N.NLMSGERR_ATTR_MSG, codec: cstring },
  offset: { type: N.NLMSGERR_ATTR_OFFS, codec: u32 },
  cookie: { type: N.NLMSGERR_ATTR_COOKIE, codec: bytes },
  policy: { type: N.NLMSGERR_ATTR_POLICY, codec: attrList },
  missType: { type: N.NLMSGERR_ATTR_MISS_TYPE, codec: u32 },
  missNest: { type: N.NLMSGERR_ATTR_MISS_NEST, codec: u32 },
};

export interface NlMsgErr {
  /** 0 for a positive ack, else a negative errno. */
  error: number;
  /** The header of the request being answered, with its original nlmsg_len. */
  request: NlMsgHdr & { len: number };
  /** The request's payload; absent when the answer is capped (always for a positive ack). */
  requestPayload?: Uint8Array;
  extack: ExtAck;
}

const ERRNO_LEN = 4;

/** Decodes the payload of an NLMSG_ERROR; `flags` are the outer header's (CAPPED, ACK_TLVS). */
export function decodeNlMsgErr(message: NetlinkMessage): NlMsgErr {
  const p = message.payload;
  if (p.length < ERRNO_LEN + N.NLMSG_HDRLEN) {
    throw new NetlinkProtocolError(
      `NLMSG_ERROR payload of ${p.length} bytes is shorter than struct nlmsgerr`,
    );
  }
  const v = dataView(p);
  const request = {
    len: v.getUint32(4, HOST_LITTLE_ENDIAN),
    type: v.getUint16(8, HOST_LITTLE_ENDIAN),
    flags: v.getUint16(10, HOST_LITTLE_ENDIAN),
    seq: v.getUint32(12, HOST_LITTLE_ENDIAN),
    pid: v.getUint32(16, HOST_LITTLE_ENDIAN),
  };
  const out: NlMsgErr = { error: v.getInt32(0, HOST_LITTLE_ENDIAN), request, extack: {} };
  let off = ERRNO_LEN + N.NLMSG_HDRLEN;
  if ((message.header.flags & N.NLM_F_CAPPED) === 0) {
    const payloadLen = request.len - N.NLMSG_HDRLEN;
    if (payloadLen < 0 || off + payloadLen > p.length) {
      throw new NetlinkProtocolError(`NLMSG_ERROR echoes a ${request.len}-byte request that does not fit`);
    }
    out.requestPayload = copyBytes(p.subarray(off, off + payloadLen));
    off += N.NLMSG_ALIGN(payloadLen);
  }
  if ((message.header.flags & N.NLM_F_ACK_TLVS) !== 0 && off < p.length) {
    out.extack = decodeWithSchema(EXTACK_SCHEMA, decodeAttributes(p.subarray(off)));
  }
  return out;
}

/** Builds an NLMSG_ERROR payload and the outer flags it needs (the kernel's side; used by tests). */
export function encodeNlMsgErr(e: NlMsgErr): { flags: number; payload: Uint8Array } {
  const head = new Uint8Array(ERRNO_LEN + N.NLMSG_HDRLEN);
  const v = dataView(head);
  v.setInt32(0, e.error, HOST_LITTLE_ENDIAN);
  v.setUint32(4, e.request.len, HOST_LITTLE_ENDIAN);
  v.setUint16(8, e.request.type, HOST_LITTLE_ENDIAN);
  v.setUint16(10, e.request.flags, HOST_LITTLE_ENDIAN);
  v.setUint32(12, e.request.seq, HOST_LITTLE_ENDIAN);
  v.setUint32(16, e.request.pid, HOST_LITTLE_ENDIAN);
  const parts: Uint8Array[] = [head];
  let flags = 0;
  if (e.requestPayload === undefined) {
    flags |= N.NLM_F_CAPPED;
  } else {
    const padded = new Uint8Array(N.NLMSG_ALIGN(e.requestPayload.length));
    padded.set(e.requestPayload);
    parts.push(padded);
  }
  const tlvs = encodeWithSchema(EXTACK_SCHEMA, e.extack);
  if (tlvs.length > 0) {
    flags |= N.NLM_F_ACK_TLVS;
    parts.push(encodeAttributes(tlvs));
  }
  return { flags, payload: concatBytes(parts) };
}

export interface NlMsgDone {
  /** 0 when the dump completed, else the negative errno that ended it. */
  error: number;
  extack: ExtAck;
}

/** Decodes NLMSG_DONE: an int (absent from some old kernels' answers) and optional ack TLVs. */
export function decodeDone(message: NetlinkMessage): NlMsgDone {
  const p = message.payload;
  if (p.length < ERRNO_LEN) return { error: 0, extack: {} };
  const error = dataView(p).getInt32(0, HOST_LITTLE_ENDIAN);
  const extack =
    (message.header.flags & N.NLM_F_ACK_TLVS) !== 0
      ? decodeWithSchema(EXTACK_SCHEMA, decodeAttributes(p.subarray(ERRNO_LEN)))
      : {};
  return { error, extack };
}
