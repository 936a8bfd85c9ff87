/**
 * A failed API server call as one error type, marked the way `storeFailure` (cluster/store.ts)
 * reads store errors: `unreachable` (no answer: refused, reset, timed out; or the server could not
 * serve, 5xx/429), `rejected` (the server and podwire do not trust each other: TLS verification,
 * 401, 403), or neither (the server answered and refuses the request: 404, 409, 410, 422).
 * `status` is the HTTP status, or the `code` of a watch stream's ERROR event; `reason` the
 * Status object's reason (e.g. `Expired`, `Gone`, `Conflict`).
 */
import { PodwireError } from '../base/errors.js';

export class KubeApiError extends PodwireError {
  readonly status: number | undefined;
  readonly reason: string | undefined;
  declare readonly unreachable?: boolean;
  declare readonly rejected?: boolean;

  constructor(
    message: string,
    opts: { status?: number; reason?: string; unreachable?: boolean; rejected?: boolean; cause?: unknown },
  ) {
    super('ERR_STORE', message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.status = opts.status;
    this.reason = opts.reason;
    if (opts.unreachable !== undefined || opts.rejected !== undefined) {
      Object.assign(this, { unreachable: opts.unreachable ?? false, rejected: opts.rejected ?? false });
    }
  }

  /** The history the request asked for is gone (HTTP 410, or a watch ERROR event with code 410). */
  get gone(): boolean {
    return this.status === 410;
  }
}

/** A Kubernetes `Status` object's fields (what a failed call or a watch ERROR event carries). */
export interface WireStatus {
  kind?: string;
  code?: number;
  reason?: string;
  message?: string;
}

/** The error an HTTP status and its body (a Status object, usually) make. */
export function answerError(what: string, status: number, body: string): KubeApiError {
  let s: WireStatus = {};
  try {
    s = JSON.parse(body) as WireStatus;
  } catch {
    // not a Status object (a proxy's page, say): the status line alone tells what happened
  }
  const text = typeof s.message === 'string' ? s.message : body.slice(0, 200);
  const reason = typeof s.reason === 'string' ? s.reason : undefined;
  const msg = `${what}: HTTP ${status}${reason ? ` ${reason}` : ''}: ${text}`;
  if (status === 401 || status === 403) return new KubeApiError(msg, { status, reason, rejected: true });
  if (status >= 500 || status === 429) return new KubeApiError(msg, { status, reason, unreachable: false });
  return new KubeApiError(msg, { status, reason });
}

const TLS_CODES = /^(ERR_TLS_|CERT_|UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|ERR_SSL_)/;

/** The error a request that got no answer makes. */
export function transportError(what: string, err: unknown): KubeApiError {
  if (err instanceof KubeApiError) return err;
  const code = (err as NodeJS.ErrnoException)?.code ?? '';
  const text = err instanceof Error ? err.message : String(err);
  if (TLS_CODES.test(code) || /certificate|alert/i.test(text)) {
    return new KubeApiError(`${what}: TLS: ${text}`, { rejected: true, cause: err });
  }
  return new KubeApiError(`${what}: ${text}`, { unreachable: true, cause: err });
}
