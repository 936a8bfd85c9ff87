/**
 * podwire's errors: one base class with a stable string `code` naming the failure in podwire's own
 * terms, and one subclass per code (so a caller can `instanceof` the failure it handles). Which CNI
 * error number a code becomes is decided only where an answer goes back to the runtime
 * (`src/cni/errors.ts`): no layer below the CNI boundary speaks in CNI numbers.
 */

export type PodwireErrorCode =
  | 'ERR_INCOMPATIBLE_VERSION'
  | 'ERR_UNSUPPORTED_FIELD'
  | 'ERR_UNKNOWN_CONTAINER'
  | 'ERR_INVALID_ENV'
  | 'ERR_IO'
  | 'ERR_DECODE'
  | 'ERR_INVALID_CONFIG'
  | 'ERR_TRY_AGAIN'
  | 'ERR_NOT_AVAILABLE'
  | 'ERR_LIMITED_CONNECTIVITY'
  | 'ERR_INTERNAL'
  | 'ERR_IPAM_EXHAUSTED'
  | 'ERR_ALREADY_ALLOCATED'
  | 'ERR_INTERFACE_EXISTS'
  | 'ERR_CHECK_FAILED'
  | 'ERR_KERNEL'
  | 'ERR_DATAPATH'
  | 'ERR_STORE';

export interface PodwireErrorOptions {
  cause?: unknown;
  /** Extra context, e.g. for the CNI `details` field. */
  details?: string;
}

export class PodwireError extends Error {
  override name = 'PodwireError';
  readonly code: PodwireErrorCode;
  readonly details: string | undefined;

  constructor(code: PodwireErrorCode, message: string, options?: PodwireErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options?.details;
  }
}

/** The request names a protocol version podwire does not speak. */
export class IncompatibleVersionError extends PodwireError {
  override name = 'IncompatibleVersionError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_INCOMPATIBLE_VERSION', message, options);
  }
}

/** A field podwire understands but cannot honour. */
export class UnsupportedFieldError extends PodwireError {
  override name = 'UnsupportedFieldError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_UNSUPPORTED_FIELD', message, options);
  }
}

/** The container (attachment) the request names is not known. */
export class UnknownContainerError extends PodwireError {
  override name = 'UnknownContainerError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_UNKNOWN_CONTAINER', message, options);
  }
}

/** The calling environment is wrong: a missing or malformed variable, a namespace that is not one. */
export class InvalidEnvError extends PodwireError {
  override name = 'InvalidEnvError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_INVALID_ENV', message, options);
  }
}

/** Reading or writing a file or socket failed. */
export class IoError extends PodwireError {
  override name = 'IoError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_IO', message, options);
  }
}

/** Bytes or text that cannot be decoded (JSON, a frame, a kernel message). */
export class DecodeError extends PodwireError {
  override name = 'DecodeError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_DECODE', message, options);
  }
}

/** A configuration value (or an address, prefix or name given as one) that is not valid. */
export class InvalidConfigError extends PodwireError {
  override name = 'InvalidConfigError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_INVALID_CONFIG', message, options);
  }
}

/** Temporarily unable to serve: the caller should retry. */
export class TryAgainError extends PodwireError {
  override name = 'TryAgainError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_TRY_AGAIN', message, options);
  }
}

/** The node cannot serve pods yet (datapath not ready). */
export class NotAvailableError extends PodwireError {
  override name = 'NotAvailableError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_NOT_AVAILABLE', message, options);
  }
}

/** The node serves, but pods may not reach everything (e.g. the cluster store is away). */
export class LimitedConnectivityError extends PodwireError {
  override name = 'LimitedConnectivityError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_LIMITED_CONNECTIVITY', message, options);
  }
}

/** A bug or an impossible state inside podwire. */
export class InternalError extends PodwireError {
  override name = 'InternalError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_INTERNAL', message, options);
  }
}

/** No free address is left in the range or pool. */
export class IpamExhaustedError extends PodwireError {
  override name = 'IpamExhaustedError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_IPAM_EXHAUSTED', message, options);
  }
}

/** The attachment already holds an address, or the address asked for is held by another. */
export class AlreadyAllocatedError extends PodwireError {
  override name = 'AlreadyAllocatedError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_ALREADY_ALLOCATED', message, options);
  }
}

/** The interface name asked for already exists in the pod. */
export class InterfaceExistsError extends PodwireError {
  override name = 'InterfaceExistsError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_INTERFACE_EXISTS', message, options);
  }
}

/** CHECK found the attachment differs from what ADD left. */
export class CheckFailedError extends PodwireError {
  override name = 'CheckFailedError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_CHECK_FAILED', message, options);
  }
}

/**
 * The kernel refused an operation or answered something unusable. A failed syscall is the
 * `KernelError` of `src/kernel/libc.ts`, which also carries the errno.
 */
export class KernelOpError extends PodwireError {
  override name = 'KernelOpError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_KERNEL', message, options);
  }
}

/** The datapath (bridge, OVS, flows, guards) failed or lacks a feature. */
export class DatapathError extends PodwireError {
  override name = 'DatapathError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_DATAPATH', message, options);
  }
}

/** The cluster store (etcd or the static file) failed or holds something unusable. */
export class StoreError extends PodwireError {
  override name = 'StoreError';
  constructor(message: string, options?: PodwireErrorOptions) {
    super('ERR_STORE', message, options);
  }
}

/** The class of each code, for code that rebuilds an error with a new message (e.g. adds context). */
export function errorWithCode(
  code: PodwireErrorCode,
  message: string,
  options?: PodwireErrorOptions,
): PodwireError {
  const Class = CLASSES[code];
  return new Class(message, options);
}

const CLASSES: Record<
  PodwireErrorCode,
  new (
    message: string,
    options?: PodwireErrorOptions,
  ) => PodwireError
> = {
  ERR_INCOMPATIBLE_VERSION: IncompatibleVersionError,
  ERR_UNSUPPORTED_FIELD: UnsupportedFieldError,
  ERR_UNKNOWN_CONTAINER: UnknownContainerError,
  ERR_INVALID_ENV: InvalidEnvError,
  ERR_IO: IoError,
  ERR_DECODE: DecodeError,
  ERR_INVALID_CONFIG: InvalidConfigError,
  ERR_TRY_AGAIN: TryAgainError,
  ERR_NOT_AVAILABLE: NotAvailableError,
  ERR_LIMITED_CONNECTIVITY: LimitedConnectivityError,
  ERR_INTERNAL: InternalError,
  ERR_IPAM_EXHAUSTED: IpamExhaustedError,
  ERR_ALREADY_ALLOCATED: AlreadyAllocatedError,
  ERR_INTERFACE_EXISTS: InterfaceExistsError,
  ERR_CHECK_FAILED: CheckFailedError,
  ERR_KERNEL: KernelOpError,
  ERR_DATAPATH: DatapathError,
  ERR_STORE: StoreError,
};
