/**
 * What etcd's JSON gateway answered, or why it did not, as one error type: GatewayError, with the
 * gRPC code etcd gave and whether the failure says anything about the request (`unreachable`) or
 * about who is asking (`rejected`). The transport is etcd-gateway.ts.
 */
import { PodwireError } from '../base/errors.js';
import type { Endpoint } from './etcd-endpoint.js';
import { tlsFailure } from './etcd-tls.js';

/**
 * A failed gateway call. `unreachable` is true when etcd could not be reached or could not answer
 * (connection refused, timeout, reset, no leader). `rejected` is true when the two sides do not
 * trust each other: the server's certificate fails verification, etcd refuses the client certificate,
 * the credentials or the user's permissions. Retrying does not help a rejection; the store's
 * health goes down on both. `grpcCode` is etcd's own error code when it answered with one
 * (11 = revision compacted, 16 = unauthenticated).
 */
export class GatewayError extends PodwireError {
  readonly unreachable: boolean;
  readonly rejected: boolean;
  readonly grpcCode: number | undefined;
  /**
   * A stream's endpoint failed and another endpoint is there to take over: reopening at once is
   * the remedy, and the store as a whole is not known to be down.
   */
  readonly failover: boolean;

  constructor(
    message: string,
    opts: {
      unreachable: boolean;
      rejected?: boolean;
      grpcCode?: number;
      failover?: boolean;
      cause?: unknown;
    },
  ) {
    super('ERR_STORE', message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.unreachable = opts.unreachable;
    this.rejected = opts.rejected ?? false;
    this.grpcCode = opts.grpcCode;
    this.failover = opts.failover ?? false;
  }
}

/** gRPC codes that mean "etcd cannot serve right now" rather than "your request is wrong". */
const UNAVAILABLE_CODES = new Set([4 /* DEADLINE_EXCEEDED */, 14 /* UNAVAILABLE */]);

/** gRPC codes of an answer that rejects the caller (see `rejection`). */
export const GRPC_INVALID_ARGUMENT = 3;
const GRPC_PERMISSION_DENIED = 7;
export const GRPC_UNAUTHENTICATED = 16;

/** A failure to reach `ep` (or a TLS refusal either way) as a GatewayError. */
export function unreachable(ep: Endpoint, path: string, err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const tls = tlsFailure(ep, err);
  if (tls !== undefined) {
    return new GatewayError(`etcd ${ep.url}${path}: ${tls}`, {
      unreachable: false,
      rejected: true,
      cause: err,
    });
  }
  const text = err instanceof Error ? ((err as { code?: string }).code ?? err.message) : String(err);
  return new GatewayError(`etcd ${ep.url}${path}: unreachable: ${text}`, { unreachable: true, cause: err });
}

export function parseJson(ep: Endpoint, path: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new GatewayError(`etcd ${ep.url}${path}: answer is not JSON: ${text.slice(0, 200)}`, {
      unreachable: false,
      cause: err,
    });
  }
}

/** 200 -> the parsed body; otherwise a GatewayError with etcd's message and gRPC code. */
export function parseAnswer<T>(
  ep: Endpoint,
  path: string,
  status: number,
  text: string,
  withAuth: boolean,
): T {
  if (status === 200) return parseJson(ep, path, text) as T;
  let message = text.trim().slice(0, 200);
  let code: number | undefined;
  try {
    const e = JSON.parse(text) as { message?: unknown; error?: unknown; code?: unknown };
    message = String(e.message ?? e.error ?? message);
    code = typeof e.code === 'number' ? e.code : undefined;
  } catch {
    // Not JSON (e.g. "Not Found" from the gateway's mux): the raw text is the message.
  }
  const opts =
    code === undefined
      ? { unreachable: status >= 500 }
      : { unreachable: UNAVAILABLE_CODES.has(code), grpcCode: code };
  const hint = rejection(code, message, withAuth);
  throw new GatewayError(`etcd ${ep.url}${path}: HTTP ${status}: ${message}${hint ?? ''}`, {
    ...opts,
    rejected: hint !== undefined,
  });
}

/** etcd answers that refuse this client (not the request): a hint saying what to fix, else undefined. */
function rejection(code: number | undefined, message: string, withAuth: boolean): string | undefined {
  if (/CommonName of client sending a request against gateway/.test(message)) {
    return ' (etcd with auth enabled refuses, on its JSON gateway, a client certificate with a Common Name: issue cluster.tls.cert without a CN, e.g. -subj /O=podwire)';
  }
  // Without a token etcd answers either, depending on how the client certificate is read.
  const anonymous = !withAuth && (code === GRPC_PERMISSION_DENIED || /user name is empty/.test(message));
  if (anonymous) return ' (etcd requires authentication: set cluster.auth)';
  if (code === GRPC_INVALID_ARGUMENT && /authentication failed/.test(message)) return '';
  if (code === GRPC_PERMISSION_DENIED)
    return " (the etcd user lacks read-write permission on the store's prefix)";
  return undefined;
}
