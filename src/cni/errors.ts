/**
 * Errors inside podwire carry a stable string `code`; the CNI numeric code is derived from it only at
 * the boundary where an answer goes back to the runtime (see `toCniErrorObject`).
 */

/** Every failure podwire reports, with the CNI error code (SPEC.md "Error codes") it maps to. */
export const CNI_CODES = {
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
  // 100 and up: podwire's own.
  ERR_INTERNAL: 100,
  ERR_IPAM_EXHAUSTED: 101,
  ERR_ALREADY_ALLOCATED: 102,
  ERR_INTERFACE_EXISTS: 103,
  ERR_CHECK_FAILED: 104,
  ERR_KERNEL: 105,
  ERR_DATAPATH: 106,
  ERR_STORE: 107,
} as const;

export type PodwireErrorCode = keyof typeof CNI_CODES;

export class PodwireError extends Error {
  override readonly name = 'PodwireError';
  readonly code: PodwireErrorCode;
  /** Extra context for the CNI `details` field. */
  readonly details: string | undefined;

  constructor(code: PodwireErrorCode, message: string, options?: { cause?: unknown; details?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options?.details;
  }
}

/** The CNI error object (SPEC.md "Error") written to the runtime. */
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
