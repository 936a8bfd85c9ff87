/**
 * OFPT_ERROR (OpenFlow 1.3.5, 7.5.4 "Error Message"; OpenFlow 1.0.0, 5.4.4): type, code and at
 * least 64 bytes of the request that failed. An OFPET_EXPERIMENTER error carries its own code
 * (exp_code) and the experimenter id instead (ofp_error_experimenter_msg); OVS reports the ONF
 * bundle extension's errors that way on 1.3 (ONF1.3(2300..2315) in OVS's ofp-errors.h).
 * `OpenflowError` names type and code by their spec names where podwire knows them, and falls back
 * to numbers.
 */
import { DatapathError, DecodeError } from '../../../base/errors.js';
import { OFP10_VERSION, OFP13_VERSION, OFPT10, OFPT13 } from './header.js';

/** enum ofp_error_type, OpenFlow 1.3. */
export const OFPET13 = {
  HELLO_FAILED: 0,
  BAD_REQUEST: 1,
  BAD_ACTION: 2,
  BAD_INSTRUCTION: 3,
  BAD_MATCH: 4,
  FLOW_MOD_FAILED: 5,
  GROUP_MOD_FAILED: 6,
  PORT_MOD_FAILED: 7,
  TABLE_MOD_FAILED: 8,
  QUEUE_OP_FAILED: 9,
  SWITCH_CONFIG_FAILED: 10,
  ROLE_REQUEST_FAILED: 11,
  METER_MOD_FAILED: 12,
  TABLE_FEATURES_FAILED: 13,
  EXPERIMENTER: 0xffff,
} as const;

/** enum ofp_error_type, OpenFlow 1.0. */
export const OFPET10 = {
  HELLO_FAILED: 0,
  BAD_REQUEST: 1,
  BAD_ACTION: 2,
  FLOW_MOD_FAILED: 3,
  PORT_MOD_FAILED: 4,
  QUEUE_OP_FAILED: 5,
} as const;

/** The codes of each 1.3 error type (prefix, names in code order). */
const CODES13: Record<number, [string, string[]]> = {
  [OFPET13.HELLO_FAILED]: ['OFPHFC', ['INCOMPATIBLE', 'EPERM']],
  [OFPET13.BAD_REQUEST]: [
    'OFPBRC',
    [
      'BAD_VERSION',
      'BAD_TYPE',
      'BAD_MULTIPART',
      'BAD_EXPERIMENTER',
      'BAD_EXP_TYPE',
      'EPERM',
      'BAD_LEN',
      'BUFFER_EMPTY',
      'BUFFER_UNKNOWN',
      'BAD_TABLE_ID',
      'IS_SLAVE',
      'BAD_PORT',
      'BAD_PACKET',
      'MULTIPART_BUFFER_OVERFLOW',
    ],
  ],
  [OFPET13.BAD_ACTION]: [
    'OFPBAC',
    [
      'BAD_TYPE',
      'BAD_LEN',
      'BAD_EXPERIMENTER',
      'BAD_EXP_TYPE',
      'BAD_OUT_PORT',
      'BAD_ARGUMENT',
      'EPERM',
      'TOO_MANY',
      'BAD_QUEUE',
      'BAD_OUT_GROUP',
      'MATCH_INCONSISTENT',
      'UNSUPPORTED_ORDER',
      'BAD_TAG',
      'BAD_SET_TYPE',
      'BAD_SET_LEN',
      'BAD_SET_ARGUMENT',
    ],
  ],
  [OFPET13.BAD_INSTRUCTION]: [
    'OFPBIC',
    [
      'UNKNOWN_INST',
      'UNSUP_INST',
      'BAD_TABLE_ID',
      'UNSUP_METADATA',
      'UNSUP_METADATA_MASK',
      'BAD_EXPERIMENTER',
      'BAD_EXP_TYPE',
      'BAD_LEN',
      'EPERM',
    ],
  ],
  [OFPET13.BAD_MATCH]: [
    'OFPBMC',
    [
      'BAD_TYPE',
      'BAD_LEN',
      'BAD_TAG',
      'BAD_DL_ADDR_MASK',
      'BAD_NW_ADDR_MASK',
      'BAD_WILDCARDS',
      'BAD_FIELD',
      'BAD_VALUE',
      'BAD_MASK',
      'BAD_PREREQ',
      'DUP_FIELD',
      'EPERM',
    ],
  ],
  [OFPET13.FLOW_MOD_FAILED]: [
    'OFPFMFC',
    ['UNKNOWN', 'TABLE_FULL', 'BAD_TABLE_ID', 'OVERLAP', 'EPERM', 'BAD_TIMEOUT', 'BAD_COMMAND', 'BAD_FLAGS'],
  ],
  [OFPET13.GROUP_MOD_FAILED]: [
    'OFPGMFC',
    [
      'GROUP_EXISTS',
      'INVALID_GROUP',
      'WEIGHT_UNSUPPORTED',
      'OUT_OF_GROUPS',
      'OUT_OF_BUCKETS',
      'CHAINING_UNSUPPORTED',
      'WATCH_UNSUPPORTED',
      'LOOP',
      'UNKNOWN_GROUP',
      'CHAINED_GROUP',
      'BAD_TYPE',
      'BAD_COMMAND',
      'BAD_BUCKET',
      'BAD_WATCH',
      'EPERM',
    ],
  ],
  [OFPET13.PORT_MOD_FAILED]: ['OFPPMFC', ['BAD_PORT', 'BAD_HW_ADDR', 'BAD_CONFIG', 'BAD_ADVERTISE', 'EPERM']],
  [OFPET13.TABLE_MOD_FAILED]: ['OFPTMFC', ['BAD_TABLE', 'BAD_CONFIG', 'EPERM']],
};

/** The codes of each 1.0 error type. */
const CODES10: Record<number, [string, string[]]> = {
  [OFPET10.HELLO_FAILED]: ['OFPHFC', ['INCOMPATIBLE', 'EPERM']],
  [OFPET10.BAD_REQUEST]: [
    'OFPBRC',
    [
      'BAD_VERSION',
      'BAD_TYPE',
      'BAD_STAT',
      'BAD_VENDOR',
      'BAD_SUBTYPE',
      'EPERM',
      'BAD_LEN',
      'BUFFER_EMPTY',
      'BUFFER_UNKNOWN',
    ],
  ],
  [OFPET10.BAD_ACTION]: [
    'OFPBAC',
    [
      'BAD_TYPE',
      'BAD_LEN',
      'BAD_VENDOR',
      'BAD_VENDOR_TYPE',
      'BAD_OUT_PORT',
      'BAD_ARGUMENT',
      'EPERM',
      'TOO_MANY',
      'BAD_QUEUE',
    ],
  ],
  [OFPET10.FLOW_MOD_FAILED]: [
    'OFPFMFC',
    ['ALL_TABLES_FULL', 'OVERLAP', 'EPERM', 'BAD_EMERG_TIMEOUT', 'BAD_COMMAND', 'UNSUPPORTED'],
  ],
  [OFPET10.PORT_MOD_FAILED]: ['OFPPMFC', ['BAD_PORT', 'BAD_HW_ADDR']],
  [OFPET10.QUEUE_OP_FAILED]: ['OFPQOFC', ['BAD_PORT', 'BAD_QUEUE', 'EPERM']],
};

/** ONF's experimenter id (ONF_EXPERIMENTER_ID in OVS's openflow-common.h). */
export const ONF_EXPERIMENTER_ID = 0x4f4e4600;
/** Nicira's (NX_VENDOR_ID): OVS's own extension errors. */
export const NX_EXPERIMENTER_ID = 0x00002320;

/** The ONF bundle extension's error codes on 1.3: exp_code 2300 + OpenFlow 1.4's OFPBFC_* code. */
const ONF_BUNDLE_CODES = [
  'UNKNOWN',
  'EPERM',
  'BAD_ID',
  'BUNDLE_EXIST',
  'BUNDLE_CLOSED',
  'OUT_OF_BUNDLES',
  'BAD_TYPE',
  'BAD_FLAGS',
  'MSG_BAD_LEN',
  'MSG_BAD_XID',
  'MSG_UNSUP',
  'MSG_CONFLICT',
  'MSG_TOO_MANY',
  'MSG_FAILED',
  'TIMEOUT',
  'BUNDLE_IN_PROGRESS',
];
export const OFPBFC_ONF13_BASE = 2300;
export const OFPBFC_MSG_FAILED = OFPBFC_ONF13_BASE + 13;
export const OFPBFC_BAD_ID = OFPBFC_ONF13_BASE + 2;

export interface ErrorMsg {
  errorType: number;
  /** `code`, or for OFPET_EXPERIMENTER the exp_code. */
  errorCode: number;
  /** For OFPET_EXPERIMENTER: the experimenter id. */
  experimenter?: number;
  /** The failing request's first bytes (its header first), as the switch returned them. */
  data: Buffer;
}

/** Decodes an OFPT_ERROR body (after the 8-byte header). */
export function decodeErrorMsg(body: Buffer): ErrorMsg {
  if (body.length < 4) throw new DecodeError(`OFPT_ERROR body of ${body.length} bytes, need 4`);
  const errorType = body.readUInt16BE(0);
  const errorCode = body.readUInt16BE(2);
  if (errorType === OFPET13.EXPERIMENTER && body.length >= 8) {
    return { errorType, errorCode, experimenter: body.readUInt32BE(4), data: body.subarray(8) };
  }
  return { errorType, errorCode, data: body.subarray(4) };
}

/** The error body a switch would send: for tests and fakes. */
export function encodeErrorMsg(e: ErrorMsg): Buffer {
  const head = Buffer.alloc(e.experimenter === undefined ? 4 : 8);
  head.writeUInt16BE(e.errorType, 0);
  head.writeUInt16BE(e.errorCode, 2);
  if (e.experimenter !== undefined) head.writeUInt32BE(e.experimenter >>> 0, 4);
  return Buffer.concat([head, e.data]);
}

/** "OFPET_FLOW_MOD_FAILED/OFPFMFC_BAD_TABLE_ID", or numbers where the name is not known. */
export function errorName(
  version: number,
  e: Pick<ErrorMsg, 'errorType' | 'errorCode' | 'experimenter'>,
): string {
  if (e.errorType === OFPET13.EXPERIMENTER && version !== OFP10_VERSION) {
    const i = e.errorCode - OFPBFC_ONF13_BASE;
    if (e.experimenter === ONF_EXPERIMENTER_ID && i >= 0 && i < ONF_BUNDLE_CODES.length) {
      return `OFPET_EXPERIMENTER/ONF OFPBFC_${ONF_BUNDLE_CODES[i]}`;
    }
    const exp = e.experimenter === undefined ? '?' : `0x${e.experimenter.toString(16).padStart(8, '0')}`;
    return `OFPET_EXPERIMENTER/experimenter ${exp} code ${e.errorCode}`;
  }
  const types: Record<string, number> = version === OFP10_VERSION ? OFPET10 : OFPET13;
  const typeName = Object.entries(types).find(([, v]) => v === e.errorType)?.[0];
  const codes = (version === OFP10_VERSION ? CODES10 : CODES13)[e.errorType];
  const codeName = codes?.[1][e.errorCode];
  const t = typeName ? `OFPET_${typeName}` : `type ${e.errorType}`;
  const c = codes && codeName ? `${codes[0]}_${codeName}` : `code ${e.errorCode}`;
  return `${t}/${c}`;
}

/** Which request an error answered: its type and xid, and its place in a transact()/bundle(). */
export interface FailedRequest {
  type: number;
  xid: number;
  index?: number;
}

/** The switch answered a request with OFPT_ERROR. */
export class OpenflowError extends DatapathError {
  override name = 'OpenflowError';
  readonly errorType: number;
  readonly errorCode: number;
  readonly experimenter: number | undefined;
  readonly request: FailedRequest;
  readonly data: Buffer;

  constructor(version: number, e: ErrorMsg, request: FailedRequest, context: string) {
    const where = request.index === undefined ? '' : `, message ${request.index}`;
    super(
      `OpenFlow ${context}: the switch answered ${errorName(version, e)} (type ${e.errorType}, code ${e.errorCode}) ` +
        `to ${typeName(version, request.type)} xid ${request.xid}${where}`,
    );
    this.errorType = e.errorType;
    this.errorCode = e.errorCode;
    this.experimenter = e.experimenter;
    this.request = request;
    this.data = e.data;
  }
}

/** Message type numbers to names, per version, from header.ts's tables. */
const TYPE_NAMES = new Map(
  [
    [OFP13_VERSION, OFPT13],
    [OFP10_VERSION, OFPT10],
  ].map(([version, types]) => [
    version as number,
    new Map(Object.entries(types as Record<string, number>).map(([name, n]) => [n, name])),
  ]),
);

/** "OFPT_FLOW_MOD (14)", or "type N". */
export function typeName(version: number, type: number): string {
  const name = (TYPE_NAMES.get(version) ?? TYPE_NAMES.get(OFP13_VERSION))?.get(type);
  return name ? `OFPT_${name} (${type})` : `type ${type}`;
}
