/**
 * Bundles on OpenFlow 1.3: ONF extension EXT-230, which OVS implements as OFPT_EXPERIMENTER with
 * experimenter ONF_EXPERIMENTER_ID and exp_type ONFT_BUNDLE_CONTROL / ONFT_BUNDLE_ADD_MESSAGE
 * (OVS's ofp-msgs.h: "ONFT 1.3 (2300)" and "(2301)"), whose bodies are OpenFlow 1.4's
 * ofp_bundle_ctrl_msg and ofp_bundle_add_msg (OpenFlow 1.4.1, 7.3.9 "Bundle messages"). The add
 * message carries a whole inner message, header included, with the add message's own xid (OVS
 * refuses another with OFPBFC_MSG_BAD_XID).
 */
import { DecodeError } from '../../../base/errors.js';
import { ONF_EXPERIMENTER_ID } from './error-msg.js';
import { encodeMessage } from './header.js';

export { ONF_EXPERIMENTER_ID };

/** ONF experimenter message types of EXT-230. */
export const ONFT_BUNDLE_CONTROL = 2300;
export const ONFT_BUNDLE_ADD_MESSAGE = 2301;

/** enum ofp_bundle_ctrl_type (OpenFlow 1.4). */
export const OFPBCT = {
  OPEN_REQUEST: 0,
  OPEN_REPLY: 1,
  CLOSE_REQUEST: 2,
  CLOSE_REPLY: 3,
  COMMIT_REQUEST: 4,
  COMMIT_REPLY: 5,
  DISCARD_REQUEST: 6,
  DISCARD_REPLY: 7,
} as const;

/** enum ofp_bundle_flags (OpenFlow 1.4). */
export const OFPBF_ATOMIC = 1 << 0;
export const OFPBF_ORDERED = 1 << 1;

/** ofp_experimenter_header after ofp_header: experimenter, exp_type. */
const EXPERIMENTER_HEADER_LEN = 8;

function experimenterBody(expType: number, rest: Uint8Array): Buffer {
  const out = Buffer.alloc(EXPERIMENTER_HEADER_LEN + rest.length);
  out.writeUInt32BE(ONF_EXPERIMENTER_ID, 0);
  out.writeUInt32BE(expType, 4);
  out.set(rest, EXPERIMENTER_HEADER_LEN);
  return out;
}

/** The OFPT_EXPERIMENTER body of a bundle control message (bundle_id, type, flags; no properties). */
export function encodeBundleCtrl(bundleId: number, type: number, flags: number): Buffer {
  const m = Buffer.alloc(8);
  m.writeUInt32BE(bundleId >>> 0, 0);
  m.writeUInt16BE(type, 4);
  m.writeUInt16BE(flags, 6);
  return experimenterBody(ONFT_BUNDLE_CONTROL, m);
}

/**
 * The OFPT_EXPERIMENTER body of a bundle add message: bundle_id, pad[2], flags, then the inner
 * message (`version`, `type`, `body`) with header, its xid `xid` (the add message's own).
 */
export function encodeBundleAdd(
  bundleId: number,
  flags: number,
  version: number,
  xid: number,
  type: number,
  body: Uint8Array,
): Buffer {
  const inner = encodeMessage(version, type, xid, body);
  const m = Buffer.alloc(8 + inner.length);
  m.writeUInt32BE(bundleId >>> 0, 0);
  m.writeUInt16BE(flags, 6);
  m.set(inner, 8);
  return experimenterBody(ONFT_BUNDLE_ADD_MESSAGE, m);
}

export interface BundleCtrl {
  bundleId: number;
  type: number;
  flags: number;
}

/** Decodes an OFPT_EXPERIMENTER body that must be an ONF bundle control message. */
export function decodeBundleCtrl(body: Buffer): BundleCtrl {
  if (
    body.length < 16 ||
    body.readUInt32BE(0) !== ONF_EXPERIMENTER_ID ||
    body.readUInt32BE(4) !== ONFT_BUNDLE_CONTROL
  ) {
    throw new DecodeError('expected an ONF bundle control message');
  }
  return { bundleId: body.readUInt32BE(8), type: body.readUInt16BE(12), flags: body.readUInt16BE(14) };
}
