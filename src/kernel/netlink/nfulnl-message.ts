/**
 * nfnetlink_log's messages (linux/netfilter/nfnetlink_log.h): the config request that binds a group
 * and sets its copy mode, and the packet message the kernel sends for each logged packet. Pure codec:
 * no socket (nflog-socket.ts sends and receives them).
 */
import { attrType, decodeAttributes, encodeAttributes, type RtAttr } from './attributes.js';
import type { NetlinkMessage } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import { NFGENMSG_LEN } from './uapi/nfnetlink.js';
import {
  NFNL_SUBSYS_ULOG,
  NFULA_CFG_CMD,
  NFULA_CFG_MODE,
  NFULA_CFG_QTHRESH,
  NFULA_CFG_TIMEOUT,
  NFULA_IFINDEX_INDEV,
  NFULA_IFINDEX_OUTDEV,
  NFULA_PACKET_HDR,
  NFULA_PAYLOAD,
  NFULA_PREFIX,
  NFULNL_COPY_PACKET,
  NFULNL_MSG_CONFIG,
  NFULNL_MSG_PACKET,
  NFULNL_MSG_PACKET_HDR_LEN,
} from './uapi/nfnetlink-log.js';

/** The full message type of a config request and of a packet message. */
export const NFULNL_CONFIG_TYPE = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
export const NFULNL_PACKET_TYPE = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;

const be32 = (n: number): Uint8Array => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n, false);
  return b;
};

export interface NflogBind {
  group: number;
  /** Bytes of each packet copied (from its network header): the headers, not the data. */
  copyRange: number;
  /** Packets queued in the kernel before a message is sent; 1: each at once. */
  queueThreshold: number;
  /** Longest a queued packet waits, in hundredths of a second. */
  flushTimeout: number;
}

/**
 * The payload of a config request (struct nfgenmsg with res_id = the group, then the attributes):
 * NFULNL_CFG_CMD_BIND (or another command) and, with `bind`, the copy mode NFULNL_COPY_PACKET, the
 * queue threshold and the flush timeout, all in one message (the kernel applies the command first).
 */
export function encodeNflogConfig(
  command: number,
  group: number,
  bind?: Omit<NflogBind, 'group'>,
): Uint8Array {
  if (!Number.isInteger(group) || group < 0 || group > 0xffff)
    throw new NetlinkProtocolError(`NFLOG group ${group} is not 0-65535`);
  const attrs: RtAttr[] = [{ type: NFULA_CFG_CMD, value: Uint8Array.of(command) }];
  if (bind) {
    const mode = new Uint8Array(6);
    new DataView(mode.buffer).setUint32(0, bind.copyRange, false);
    mode[4] = NFULNL_COPY_PACKET;
    attrs.push(
      { type: NFULA_CFG_MODE, value: mode },
      { type: NFULA_CFG_QTHRESH, value: be32(bind.queueThreshold) },
      { type: NFULA_CFG_TIMEOUT, value: be32(bind.flushTimeout) },
    );
  }
  const body = encodeAttributes(attrs);
  const out = new Uint8Array(NFGENMSG_LEN + body.length);
  const v = new DataView(out.buffer);
  out[0] = 0; // AF_UNSPEC
  out[1] = 0; // NFNETLINK_V0
  v.setUint16(2, group, false);
  out.set(body, NFGENMSG_LEN);
  return out;
}

/** One logged packet. */
export interface NflogPacket {
  /** nfgen_family: the protocol family the packet was logged in (NFPROTO_IPV4 / NFPROTO_IPV6 ...). */
  family: number;
  group: number;
  /** NFULA_PACKET_HDR: the packet's ethertype, and the netfilter hook it was logged at. */
  hwProtocol: number;
  hook: number;
  /** NFULA_PREFIX, '' when the rule gave none. */
  prefix: string;
  /** NFULA_IFINDEX_INDEV / OUTDEV, 0 when absent. */
  indev: number;
  outdev: number;
  /** NFULA_PAYLOAD: the packet from its network header, cut at the copy range (a copy). */
  payload: Uint8Array;
}

const be32At = (b: Uint8Array, what: string): number => {
  if (b.length !== 4) throw new NetlinkProtocolError(`${what}: ${b.length} bytes, expected 4`);
  return new DataView(b.buffer, b.byteOffset, 4).getUint32(0, false);
};

/**
 * Decodes an NFULNL_MSG_PACKET message. Throws `NetlinkProtocolError` on a message of another type,
 * a payload shorter than struct nfgenmsg, or a missing or malformed NFULA_PACKET_HDR.
 */
export function decodeNflogPacket(m: NetlinkMessage): NflogPacket {
  if (m.header.type !== NFULNL_PACKET_TYPE)
    throw new NetlinkProtocolError(
      `not an nfnetlink_log packet message: type 0x${m.header.type.toString(16)}`,
    );
  const p = m.payload;
  if (p.length < NFGENMSG_LEN)
    throw new NetlinkProtocolError(`nfnetlink_log packet: ${p.length} bytes, shorter than nfgenmsg`);
  const head = new DataView(p.buffer, p.byteOffset, NFGENMSG_LEN);
  const out: NflogPacket = {
    family: p[0] as number,
    group: head.getUint16(2, false),
    hwProtocol: -1,
    hook: -1,
    prefix: '',
    indev: 0,
    outdev: 0,
    payload: new Uint8Array(0),
  };
  for (const a of decodeAttributes(p.subarray(NFGENMSG_LEN))) {
    const v = a.value;
    switch (attrType(a)) {
      case NFULA_PACKET_HDR: {
        if (v.length < NFULNL_MSG_PACKET_HDR_LEN)
          throw new NetlinkProtocolError(`NFULA_PACKET_HDR: ${v.length} bytes`);
        out.hwProtocol = new DataView(v.buffer, v.byteOffset, 2).getUint16(0, false);
        out.hook = v[2] as number;
        break;
      }
      case NFULA_PREFIX: {
        const end = v.indexOf(0);
        out.prefix = Buffer.from(v.buffer, v.byteOffset, end < 0 ? v.length : end).toString('utf8');
        break;
      }
      case NFULA_IFINDEX_INDEV:
        out.indev = be32At(v, 'NFULA_IFINDEX_INDEV');
        break;
      case NFULA_IFINDEX_OUTDEV:
        out.outdev = be32At(v, 'NFULA_IFINDEX_OUTDEV');
        break;
      case NFULA_PAYLOAD:
        out.payload = new Uint8Array(v);
        break;
    }
  }
  if (out.hwProtocol < 0) throw new NetlinkProtocolError('nfnetlink_log packet without NFULA_PACKET_HDR');
  return out;
}
