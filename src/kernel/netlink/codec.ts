/**
 * struct nlmsghdr and message framing (netlink(7)): a datagram holds one or more messages, each
 * starting on a 4-byte boundary; nlmsg_len counts the 16-byte header and the payload, not the
 * padding after it.
 */
import { NetlinkProtocolError } from './errors.js';
import { NLMSG_ALIGN, NLMSG_HDRLEN } from './uapi/netlink.js';

/** The fields of struct nlmsghdr a sender chooses; nlmsg_len is derived from the payload. */
export interface NlMsgHdr {
  type: number;
  flags: number;
  seq: number;
  pid: number;
}

export interface NetlinkMessage {
  header: NlMsgHdr;
  /** The bytes after the header, exactly nlmsg_len - 16 of them. */
  payload: Uint8Array;
}

function view(buf: Uint8Array): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** Host byte order: netlink integers are native-endian, not network order. */
export const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** One message, padded to a 4-byte boundary so that messages can be concatenated. */
export function encodeMessage(header: NlMsgHdr, payload: Uint8Array): Uint8Array {
  const len = NLMSG_HDRLEN + payload.length;
  const out = new Uint8Array(NLMSG_ALIGN(len));
  const v = view(out);
  v.setUint32(0, len, HOST_LITTLE_ENDIAN);
  v.setUint16(4, header.type, HOST_LITTLE_ENDIAN);
  v.setUint16(6, header.flags, HOST_LITTLE_ENDIAN);
  v.setUint32(8, header.seq, HOST_LITTLE_ENDIAN);
  v.setUint32(12, header.pid, HOST_LITTLE_ENDIAN);
  out.set(payload, NLMSG_HDRLEN);
  return out;
}

/**
 * Messages back to back in one buffer, each padded (a batch's datagram), written in place: the same
 * bytes as `concatBytes(messages.map(m => encodeMessage(m.header, m.payload)))` without a copy per
 * message.
 */
export function encodeDatagram(messages: readonly NetlinkMessage[]): Buffer {
  let total = 0;
  for (const m of messages) total += NLMSG_ALIGN(NLMSG_HDRLEN + m.payload.length);
  const out = Buffer.alloc(total);
  const v = view(out);
  let off = 0;
  for (const { header, payload } of messages) {
    const len = NLMSG_HDRLEN + payload.length;
    v.setUint32(off, len, HOST_LITTLE_ENDIAN);
    v.setUint16(off + 4, header.type, HOST_LITTLE_ENDIAN);
    v.setUint16(off + 6, header.flags, HOST_LITTLE_ENDIAN);
    v.setUint32(off + 8, header.seq, HOST_LITTLE_ENDIAN);
    v.setUint32(off + 12, header.pid, HOST_LITTLE_ENDIAN);
    out.set(payload, off + NLMSG_HDRLEN);
    off += NLMSG_ALIGN(len);
  }
  return out;
}

/** Several messages in one datagram (what the kernel sends for a dump). */
export function encodeMessages(messages: readonly NetlinkMessage[]): Uint8Array {
  return concatBytes(messages.map((m) => encodeMessage(m.header, m.payload)));
}

/**
 * Splits a datagram into its messages. The payloads are views into `datagram`: copy it first if
 * the buffer is reused. Throws NetlinkProtocolError on a length that does not fit.
 */
export function decodeMessages(datagram: Uint8Array): NetlinkMessage[] {
  const out: NetlinkMessage[] = [];
  const v = view(datagram);
  let off = 0;
  while (off < datagram.length) {
    if (datagram.length - off < NLMSG_HDRLEN) {
      throw new NetlinkProtocolError(`${datagram.length - off} trailing bytes are too short for a nlmsghdr`);
    }
    const len = v.getUint32(off, HOST_LITTLE_ENDIAN);
    if (len < NLMSG_HDRLEN || off + len > datagram.length) {
      throw new NetlinkProtocolError(
        `nlmsg_len ${len} at offset ${off} does not fit a ${datagram.length}-byte datagram`,
      );
    }
    out.push({
      header: {
        type: v.getUint16(off + 4, HOST_LITTLE_ENDIAN),
        flags: v.getUint16(off + 6, HOST_LITTLE_ENDIAN),
        seq: v.getUint32(off + 8, HOST_LITTLE_ENDIAN),
        pid: v.getUint32(off + 12, HOST_LITTLE_ENDIAN),
      },
      payload: datagram.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += NLMSG_ALIGN(len);
  }
  return out;
}

export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** A DataView over exactly these bytes (a Uint8Array may be a window into a larger buffer). */
export function dataView(buf: Uint8Array): DataView {
  return view(buf);
}
