/**
 * OFPT_FEATURES_REPLY (OpenFlow 1.3.5, 7.3.1 "Handshake"; OpenFlow 1.0.0, 5.3.1): the switch's
 * datapath id and table count. The 1.0 reply also lists the ports (see port-mod-of10.ts).
 */
import { DecodeError } from '../../../base/errors.js';
import { OFP10_VERSION } from './header.js';

export interface SwitchFeatures {
  datapathId: bigint;
  nBuffers: number;
  nTables: number;
  /** 0 for the main connection (always, on a unix socket); 0 in OpenFlow 1.0, which has no field. */
  auxiliaryId: number;
  capabilities: number;
}

/** struct ofp_switch_features without its header: 24 bytes in 1.0 (before the ports) and 1.3. */
export const OFP_SWITCH_FEATURES_BODY_LEN = 24;

/** Decodes a FEATURES_REPLY body (after the 8-byte header) of `version`. */
export function decodeFeaturesReply(body: Buffer, version: number): SwitchFeatures {
  if (body.length < OFP_SWITCH_FEATURES_BODY_LEN) {
    throw new DecodeError(
      `FEATURES_REPLY body of ${body.length} bytes, need ${OFP_SWITCH_FEATURES_BODY_LEN}`,
    );
  }
  return {
    datapathId: body.readBigUInt64BE(0),
    nBuffers: body.readUInt32BE(8),
    nTables: body.readUInt8(12),
    // 1.3: auxiliary_id, pad[2], capabilities, reserved. 1.0: pad[3], capabilities, actions.
    auxiliaryId: version === OFP10_VERSION ? 0 : body.readUInt8(13),
    capabilities: body.readUInt32BE(16),
  };
}

/** The datapath id as `ovs-vsctl get bridge BR datapath_id` prints it (16 hex digits, no quotes). */
export function datapathIdText(id: bigint): string {
  return id.toString(16).padStart(16, '0');
}
