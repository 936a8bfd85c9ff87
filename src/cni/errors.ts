/**
 * The CNI boundary of podwire's errors: inside podwire every failure is a `PodwireError` with a
 * domain code (`src/base/errors.ts`); here, and only here, a code becomes the CNI error number
 * (CNI spec 1.1.0, "Error codes") written back to the runtime.
 */
import { PodwireError, type PodwireErrorCode } from '../base/errors.js';

/** The CNI error number of each code: the spec's own (1-51), podwire's from 100 on. */
export const CNI_CODES: Record<PodwireErrorCode, number> = {
  ERR_INCOMPATIBLE_VERSION: 1,
  ERR_UNSUPPORTED_FIELD: 2,
  ERR_UNKNOWN_CONTAINER: 3,
  ERR_INVALID_ENV: 4,
  ERR_IO: 5,
  ERR_DECODE: 6,
  ERR_INVALID_CONFIG: 7,
  ERR_TRY_AGAIN: 11,
  ERR_NOT_AVAILABLE: 50,
  ERR_LIMITED_CONNECTIVITY: 51,
  ERR_INTERNAL: 100,
  ERR_IPAM_EXHAUSTED: 101,
  ERR_ALREADY_ALLOCATED: 102,
  ERR_INTERFACE_EXISTS: 103,
  ERR_CHECK_FAILED: 104,
  ERR_KERNEL: 105,
  ERR_DATAPATH: 106,
  ERR_STORE: 107,
};

/** The CNI error object (spec: "Error") written to the runtime. */
export interface CniErrorObject {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

/** Converts any thrown value to a CNI error object; unknown errors become code 100 with their message. */
export function toCniErrorObject(err: unknown, cniVersion: string): CniErrorObject {
  if (err instanceof PodwireError) {
    const out: CniErrorObject = { cniVersion, code: CNI_CODES[err.code], msg: err.message };
    const details = err.details ?? causeText(err.cause);
    if (details !== undefined) out.details = details;
    return out;
  }
  const msg = err instanceof Error ? err.message : String(err);
  return { cniVersion, code: CNI_CODES.ERR_INTERNAL, msg: `internal error: ${msg}` };
}

function causeText(cause: unknown): string | undefined {
  if (cause === undefined) return undefined;
  return cause instanceof Error ? cause.message : String(cause);
}
