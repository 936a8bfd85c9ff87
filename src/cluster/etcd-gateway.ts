/**
 * HTTP transport to etcd's JSON gateway (grpc-gateway, served on every client URL: POST /v3/kv/range,
 * /v3/kv/txn, /v3/watch, ...). Node's own `http` and `tls`, no dependency.
 *
 * Security (issue 15, finding 1): an `https://` endpoint is spoken over TLS, its certificate verified
 * against the configured CA with its host name or IP address checked; a client certificate is
 * presented when configured. With `auth`, every request carries the token of etcd's
 * /v3/auth/authenticate in its Authorization header; a token etcd no longer accepts (expired,
 * revoked: gRPC code 16) is renewed once and the request tried again. Whether plain `http://` is
 * allowed at all is the configuration's business (config.ts: only with `insecure: true`).
 *
 * Invariants:
 * - every unary call finishes within `requestTimeoutMs` per endpoint tried (timeouts, not hope);
 * - a stream (watch) is bounded until its response headers arrive; afterwards its liveness is the
 *   health monitor's business (a paused etcd keeps the TCP connection open but sends nothing);
 * - nothing is pooled: each request has its own connection, so a dead etcd never leaves a stale
 *   pooled socket to trip the next call, and `destroy()` ends everything in flight.
 */
import http from 'node:http';
import { isIP, createConnection as netConnect, type Socket } from 'node:net';
import { type SecureContext, connect as tlsConnect } from 'node:tls';
import { InvalidConfigError, PodwireError, StoreError } from '../base/errors.js';
import { type EtcdTls, sameTls, secureContext, tlsFailure } from './etcd-tls.js';

/** Opens the TCP connection to an endpoint; tests pass one that creates the socket in another netns. */
export type ConnectFn = (target: { host: string; port: number }) => Socket;

export interface EtcdAuth {
  username: string;
  password: string;
}

export interface EtcdGatewayOptions {
  /** Client URLs, `http://host:port` or `https://host:port`. */
  endpoints: string[];
  requestTimeoutMs: number;
  connect?: ConnectFn;
  /** For `https://` endpoints. */
  tls?: EtcdTls;
  /** etcd user and password: requests carry an auth token. */
  auth?: EtcdAuth;
}

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

  constructor(
    message: string,
    opts: { unreachable: boolean; rejected?: boolean; grpcCode?: number; cause?: unknown },
  ) {
    super('ERR_STORE', message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.unreachable = opts.unreachable;
    this.rejected = opts.rejected ?? false;
    this.grpcCode = opts.grpcCode;
  }
}

/** gRPC codes that mean "etcd cannot serve right now" rather than "your request is wrong". */
const UNAVAILABLE_CODES = new Set([4 /* DEADLINE_EXCEEDED */, 14 /* UNAVAILABLE */]);
/** Errors raised before a byte was sent: trying the next endpoint cannot apply a write twice. */
const CONNECT_ERRNOS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

/** gRPC codes of an answer that rejects the caller (see `rejection`). */
const GRPC_INVALID_ARGUMENT = 3;
const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNAUTHENTICATED = 16;

export interface Endpoint {
  url: string;
  host: string;
  port: number;
  secure: boolean;
}

export function parseEndpoint(url: string): Endpoint {
  let u: URL;
  try {
    u = new URL(url);
  } catch (err) {
    throw new InvalidConfigError(`cluster.endpoints: ${JSON.stringify(url)} is not a URL`, {
      cause: err,
    });
  }
  const scheme = u.protocol.slice(0, -1);
  if (
    (scheme !== 'http' && scheme !== 'https') ||
    u.pathname !== '/' ||
    u.search !== '' ||
    u.hash !== '' ||
    u.username !== ''
  ) {
    throw new InvalidConfigError(`cluster.endpoints: ${url}: must be https://HOST:PORT or http://HOST:PORT`);
  }
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  const secure = scheme === 'https';
  const port = u.port === '' ? (secure ? 443 : 80) : Number(u.port);
  return { url: `${scheme}://${u.host}`, host, port, secure };
}

export class EtcdGateway {
  readonly #endpoints: Endpoint[];
  readonly #timeoutMs: number;
  readonly #connect: ConnectFn;
  /** Built from the configured PEMs (again when they change); undefined when no endpoint is https. */
  #secureContext: SecureContext | undefined;
  #tls: EtcdTls | undefined;
  #auth: EtcdAuth | undefined;
  /** The auth token in use, or the authentication in flight that all callers wait for. */
  #token: Promise<string | undefined> | undefined;
  /** `#token` once settled. */
  #tokenValue: string | undefined;
  /** Aborts every request in flight; set once by destroy(). */
  readonly #destroyed = new AbortController();
  /** The endpoint that answered last; calls start there. */
  #preferred = 0;

  constructor(opts: EtcdGatewayOptions) {
    if (opts.endpoints.length === 0) {
      throw new InvalidConfigError('cluster.endpoints: at least one etcd endpoint is needed');
    }
    this.#endpoints = opts.endpoints.map(parseEndpoint);
    this.#timeoutMs = opts.requestTimeoutMs;
    this.#connect = opts.connect ?? ((t) => netConnect({ host: t.host, port: t.port }));
    this.#auth = opts.auth;
    this.#tls = opts.tls;
    this.#secureContext = this.#endpoints.some((e) => e.secure) ? secureContext(opts.tls ?? {}) : undefined;
  }

  /**
   * New certificates or credentials (rotated files): later connections use them; requests in flight
   * and an open watch keep theirs. Throws ERR_INVALID_CONFIG, keeping the old ones, when the new
   * PEMs are unusable. Returns whether anything changed.
   */
  setSecrets(secrets: { tls?: EtcdTls; auth?: EtcdAuth }): boolean {
    let changed = false;
    if (!sameTls(this.#tls, secrets.tls) && this.#secureContext !== undefined) {
      this.#secureContext = secureContext(secrets.tls ?? {});
      this.#tls = secrets.tls;
      changed = true;
    }
    const auth = secrets.auth;
    if (auth?.username !== this.#auth?.username || auth?.password !== this.#auth?.password) {
      this.#auth = auth;
      this.forgetToken();
      changed = true;
    }
    return changed;
  }

  get endpoints(): string[] {
    return this.#endpoints.map((e) => e.url);
  }

  /**
   * POSTs `body` to `path` and returns the parsed answer; tries the next endpoint only on connect
   * errors. With auth, a token etcd refuses (expired) is renewed once and the call made again.
   */
  async call<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    const token = await this.#currentToken();
    try {
      return await this.#callOnce<T>(path, body, signal, token);
    } catch (err) {
      // Renew on a refused token; also when no token was needed at first (etcd's auth enabled since).
      const renew =
        this.#auth !== undefined &&
        err instanceof GatewayError &&
        (err.grpcCode === GRPC_UNAUTHENTICATED || (token === undefined && err.rejected));
      if (!renew) throw err;
      this.forgetToken(token);
      return await this.#callOnce<T>(path, body, signal, await this.#currentToken());
    }
  }

  /** Drops `token` (etcd refused it; undefined: whatever is held) so that the next call authenticates afresh. */
  forgetToken(token?: string): void {
    if (token !== undefined && token !== this.#tokenValue) return; // already renewed
    this.#token = undefined;
    this.#tokenValue = undefined;
  }

  /** The token to send, authenticating first when none is held; undefined without auth. */
  #currentToken(): Promise<string | undefined> {
    if (this.#auth === undefined) return Promise.resolve(undefined);
    if (this.#token === undefined) {
      // Not bound to the first caller's signal: others may be waiting for the same token.
      const pending = this.#authenticate(this.#auth);
      this.#token = pending;
      pending.then(
        (t) => {
          if (this.#token === pending) this.#tokenValue = t;
        },
        // A failed authentication is not kept: the next call tries again.
        () => {
          if (this.#token === pending) this.#token = undefined;
        },
      );
    }
    return this.#token;
  }

  /** Equivalent to: `etcdctl auth authenticate` (POST /v3/auth/authenticate {name, password}). */
  async #authenticate(auth: EtcdAuth): Promise<string | undefined> {
    try {
      const res = await this.#callOnce<{ token?: string }>(
        '/v3/auth/authenticate',
        { name: auth.username, password: auth.password },
        undefined,
        undefined,
      );
      if (typeof res.token !== 'string' || res.token === '') {
        throw new GatewayError(`etcd /v3/auth/authenticate: answer carries no token`, {
          unreachable: false,
          rejected: true,
        });
      }
      return res.token;
    } catch (err) {
      // etcd without auth enabled needs no token: requests go without one.
      if (err instanceof GatewayError && /authentication is not enabled/.test(err.message)) return undefined;
      if (err instanceof GatewayError && err.grpcCode === GRPC_INVALID_ARGUMENT) {
        throw new GatewayError(
          `${err.message} (cluster.auth: user ${JSON.stringify(auth.username)}: check the username and passwordFile)`,
          { unreachable: false, rejected: true, grpcCode: err.grpcCode, cause: err },
        );
      }
      throw err;
    }
  }

  async #callOnce<T>(
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    token: string | undefined,
  ): Promise<T> {
    let last: unknown;
    for (let i = 0; i < this.#endpoints.length; i++) {
      const index = (this.#preferred + i) % this.#endpoints.length;
      const ep = this.#endpoints[index] as Endpoint;
      try {
        const res = await this.#request(ep, path, body, signal, false, token);
        const text = await readAll(res);
        this.#preferred = index;
        return parseAnswer<T>(ep, path, res.statusCode ?? 0, text, this.#auth !== undefined);
      } catch (err) {
        last = err;
        const errno = (err as { cause?: { code?: unknown } }).cause?.code;
        if (!(err instanceof GatewayError) || !CONNECT_ERRNOS.has(String(errno))) throw err;
      }
    }
    throw last;
  }

  /**
   * Opens a streaming POST (the watch) and yields each JSON message. The generator ends when the
   * server ends the stream and throws a GatewayError when the connection breaks; `signal` stops it.
   */
  async *stream(path: string, body: unknown, signal: AbortSignal): AsyncGenerator<unknown, void, undefined> {
    const ep = this.#endpoints[this.#preferred] as Endpoint;
    const token = await this.#currentToken();
    const res = await this.#request(ep, path, body, signal, true, token);
    // A refused watch (bad request, no leader) answers with one error body instead of a stream.
    if (res.statusCode !== 200) {
      try {
        parseAnswer(ep, path, res.statusCode ?? 0, await readAll(res), this.#auth !== undefined);
      } catch (err) {
        if (err instanceof GatewayError && err.grpcCode === GRPC_UNAUTHENTICATED) this.forgetToken(token);
        throw err;
      }
    }
    // The bytes of the message being received, as they came: a message is decoded once its newline
    // arrives, and only the new chunk is searched for it (a large message in many chunks is never
    // re-scanned or re-concatenated per chunk, nor a UTF-8 character cut at a chunk's edge decoded).
    const partial: Buffer[] = [];
    try {
      for await (const chunk of res) {
        let rest = chunk as Buffer;
        for (let nl = rest.indexOf(0x0a); nl >= 0; nl = rest.indexOf(0x0a)) {
          partial.push(rest.subarray(0, nl));
          const line = Buffer.concat(partial).toString('utf8').trim();
          partial.length = 0;
          rest = rest.subarray(nl + 1);
          if (line !== '') yield parseJson(ep, path, line);
        }
        if (rest.length > 0) partial.push(rest);
      }
    } catch (err) {
      if (signal.aborted || this.#destroyed.signal.aborted) return;
      throw unreachable(ep, path, err);
    } finally {
      res.destroy();
    }
    if (signal.aborted || this.#destroyed.signal.aborted) return;
    throw new GatewayError(`etcd ${ep.url}${path}: stream ended by the server`, { unreachable: true });
  }

  /**
   * One connection to `ep`: TCP, and for https a TLS client on it that verifies the server's chain
   * against the CA and its certificate against the endpoint's host name or IP address (Node's
   * checkServerIdentity). An IP address is not sent as SNI (RFC 6066 allows names only).
   */
  #open(ep: Endpoint): Socket {
    const socket = this.#connect({ host: ep.host, port: ep.port });
    if (!ep.secure) return socket;
    return tlsConnect({
      socket,
      host: ep.host,
      ...(isIP(ep.host) === 0 ? { servername: ep.host } : {}),
      secureContext: this.#secureContext,
      rejectUnauthorized: true,
    });
  }

  /** Aborts every request in flight and refuses new ones. Idempotent. */
  destroy(): void {
    this.#destroyed.abort(new StoreError('etcd client closed'));
  }

  #request(
    ep: Endpoint,
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    streaming: boolean,
    token: string | undefined,
  ): Promise<http.IncomingMessage> {
    const payload = Buffer.from(JSON.stringify(body));
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    // The timeout covers the whole unary call, but only the opening of a stream.
    const signals = [this.#destroyed.signal, ...(signal ? [signal] : [])];
    const whole = AbortSignal.any([...signals, ...(streaming ? [] : [timeout])]);
    const opening = AbortSignal.any([whole, timeout]);
    return new Promise((resolve, reject) => {
      if (opening.aborted) {
        reject(abortError(ep, path, opening.reason, timeout));
        return;
      }
      const headers: http.OutgoingHttpHeaders = {
        'content-type': 'application/json',
        'content-length': payload.length,
      };
      if (token !== undefined) headers.authorization = token;
      const req = http.request({
        host: ep.host,
        port: ep.port,
        path,
        method: 'POST',
        headers,
        createConnection: () => this.#open(ep),
        signal: whole,
      });
      const onOpeningAbort = (): void => {
        req.destroy();
        reject(abortError(ep, path, opening.reason, timeout));
      };
      opening.addEventListener('abort', onOpeningAbort, { once: true });
      req.on('response', (res) => {
        opening.removeEventListener('abort', onOpeningAbort);
        resolve(res);
      });
      req.on('error', (err) => {
        opening.removeEventListener('abort', onOpeningAbort);
        reject(whole.aborted ? abortError(ep, path, whole.reason, timeout) : unreachable(ep, path, err));
      });
      req.end(payload);
    });
  }
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
  });
}

function unreachable(ep: Endpoint, path: string, err: unknown): GatewayError {
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

function abortError(ep: Endpoint, path: string, reason: unknown, timeout: AbortSignal): GatewayError {
  if (timeout.aborted && (reason as { name?: string })?.name === 'TimeoutError') {
    return new GatewayError(`etcd ${ep.url}${path}: no answer within the request timeout`, {
      unreachable: true,
      cause: reason,
    });
  }
  const why = reason instanceof Error ? reason.message : String(reason);
  return new GatewayError(`etcd ${ep.url}${path}: aborted: ${why}`, { unreachable: false, cause: reason });
}

function parseJson(ep: Endpoint, path: string, text: string): unknown {
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
function parseAnswer<T>(ep: Endpoint, path: string, status: number, text: string, withAuth: boolean): T {
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
